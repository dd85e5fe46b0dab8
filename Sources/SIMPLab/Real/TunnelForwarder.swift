import Foundation
import Glibc
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// One direction of the real TCP transfer's path, without I/O: the file lab's bottleneck
/// (towards the receiver only) and the scenario's two links, each the `ImpairedLink` model with
/// the seeded random streams of the virtual-time path (`FilePathDirection`), applied to TCP
/// segments as the lab's TCP model sees them: lost or delayed, never duplicated or held back.
struct ImpairedSegmentPath {
    private var bottleneck: BottleneckQueue?
    private var hops: [ImpairedLink<Void>]

    init(_ way: FilePathSetup.Way, of path: FilePathSetup, seed: UInt64) {
        let (first, second, stream): (LinkConditions, LinkConditions, UInt64) =
            way == .forward ? (path.sender.up, path.receiver.down, 1) : (path.receiver.up, path.sender.down, 2)
        bottleneck = way == .forward ? BottleneckQueue(path.bottleneck) : nil
        hops = [first, second].enumerated().map { index, conditions in
            ImpairedLink(conditions: conditions, random: SeededRandom(seed: seed, stream: stream * 2 + UInt64(index)))
        }
    }

    /// Packets the bottleneck's queue dropped.
    var queueDrops: Int { bottleneck?.drops ?? 0 }

    /// A packet of `size` bytes enters the path at `elapsed`: when it leaves the far end, or nil
    /// if it is lost (in the queue or on a link).
    mutating func travel(size: Int, at elapsed: TimeAmount) -> TimeAmount? {
        var time = elapsed
        if bottleneck != nil {
            guard let served = bottleneck?.admit(size: size, at: time) else { return nil }
            time = served
        }
        for index in hops.indices {
            guard let delay = hops[index].segment(at: time) else { return nil }
            time = time + delay
        }
        return time
    }
}

/// Carries the IP packets between a `TunnelPair`'s two devices through an `ImpairedSegmentPath`
/// each way: a thread per device reads its packets; the path's decisions and the delayed writes
/// happen on one event loop. Counts the TCP payload going towards the receiver (all of it,
/// retransmissions included) and the segments that repeat bytes already sent.
final class TunnelForwarder: @unchecked Sendable { // the paths and counts are confined to `loop`
    /// What went towards the receiver.
    struct Counts {
        var payloadBytes = 0
        var wireBytes = 0
        var retransmissions = 0
        var queueDrops = 0
    }

    private let tunnel: TunnelPair
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let loop: EventLoop
    private var forward: ImpairedSegmentPath
    private var backward: ImpairedSegmentPath
    private var counts = Counts()
    /// The end of the highest sequence sent so far, relative to the first data byte.
    private var firstSequence: UInt32?
    private var sentUpTo: Int64 = 0
    private var start = NIODeadline.now()
    private let stopping = NIOLockedValueBox(false)
    private let readersDone = DispatchGroup()

    init(tunnel: TunnelPair, path: FilePathSetup, seed: UInt64) {
        self.tunnel = tunnel
        loop = group.next()
        forward = ImpairedSegmentPath(.forward, of: path, seed: seed)
        backward = ImpairedSegmentPath(.backward, of: path, seed: seed)
    }

    /// Starts forwarding; blackouts count from `start`.
    func start(at start: NIODeadline) {
        self.start = start
        read(tunnel.senderDevice, towardsReceiver: true)
        read(tunnel.receiverDevice, towardsReceiver: false)
    }

    /// Stops the readers and drops what is still on its way; returns the counts.
    func stop() -> Counts {
        stopping.withLockedValue { $0 = true }
        readersDone.wait()
        let counts =
            (try? loop.submit { [self] in
                var counts = self.counts
                counts.queueDrops = forward.queueDrops
                return counts
            }.wait()) ?? Counts()
        try? group.syncShutdownGracefully()
        return counts
    }

    private func read(_ device: Int32, towardsReceiver: Bool) {
        readersDone.enter()
        let thread = Thread { [self] in
            defer { readersDone.leave() }
            var buffer = [UInt8](repeating: 0, count: 65_536)
            var waiting = pollfd(fd: device, events: Int16(POLLIN), revents: 0)
            while !stopping.withLockedValue({ $0 }) {
                guard Glibc.poll(&waiting, 1, 100) > 0 else { continue }
                let count = Glibc.read(device, &buffer, buffer.count)
                guard count > 0 else { continue }
                let packet = Array(buffer[0..<count])
                loop.execute { self.arrived(packet, towardsReceiver: towardsReceiver) }
            }
        }
        thread.start()
    }

    private func arrived(_ packet: [UInt8], towardsReceiver: Bool) {
        let elapsed = NIODeadline.now() - start
        if towardsReceiver { count(packet) }
        let leaves = towardsReceiver ? forward.travel(size: packet.count, at: elapsed) : backward.travel(size: packet.count, at: elapsed)
        guard let leaves else { return }
        let device = towardsReceiver ? tunnel.receiverDevice : tunnel.senderDevice
        let write = { _ = packet.withUnsafeBytes { Glibc.write(device, $0.baseAddress, $0.count) } }
        if leaves <= elapsed { write() } else { loop.assumeIsolated().scheduleTask(in: leaves - elapsed, write) }
    }

    /// Counts an IPv4 TCP packet's payload, and whether it repeats bytes sent before.
    private func count(_ packet: [UInt8]) {
        counts.wireBytes += packet.count
        guard packet.count >= 20, packet[0] >> 4 == 4, packet[9] == 6 else { return }
        let ipHeader = Int(packet[0] & 0x0F) * 4
        guard packet.count >= ipHeader + 20 else { return }
        let total = min(packet.count, Int(packet[2]) << 8 | Int(packet[3]))
        let tcpHeader = Int(packet[ipHeader + 12] >> 4) * 4
        let sequence = packet[(ipHeader + 4)..<(ipHeader + 8)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        if packet[ipHeader + 13] & 0x02 != 0 { firstSequence = sequence &+ 1 } // SYN
        let payload = total - ipHeader - tcpHeader
        guard payload > 0, let firstSequence else { return }
        counts.payloadBytes += payload
        let offset = Int64(sequence &- firstSequence)
        if offset < sentUpTo { counts.retransmissions += 1 }
        sentUpTo = max(sentUpTo, offset + Int64(payload))
    }
}
