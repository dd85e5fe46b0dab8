import NIOCore

/// The shape of the path a file crosses in the file lab: a bottleneck of `bytesPerSecond` with
/// a drop-tail queue holding at most `bufferTime` of traffic, in front of the scenario's links.
public struct Bottleneck: Codable, Equatable, Sendable {
    public var bytesPerSecond: Double
    public var bufferTime: TimeAmount

    /// `megabitsPerSecond` with `bufferMs` of queue.
    public init(megabitsPerSecond: Double, bufferMs: Double) {
        bytesPerSecond = megabitsPerSecond * 1e6 / 8
        bufferTime = .nanoseconds(Int64(bufferMs * 1e6))
    }

    private enum CodingKeys: String, CodingKey { case megabitsPerSecond, bufferMs }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(megabitsPerSecond: try c.decode(Double.self, forKey: .megabitsPerSecond), bufferMs: try c.decode(Double.self, forKey: .bufferMs))
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(bytesPerSecond * 8 / 1e6, forKey: .megabitsPerSecond)
        try c.encode(Double(bufferTime.nanoseconds) / 1e6, forKey: .bufferMs)
    }
}

/// A bottleneck's drop-tail FIFO without I/O, shared by the virtual-time path and the real
/// mode's proxies: a packet waits for those ahead of it, is served at `bytesPerSecond`, and is
/// dropped when it would wait longer than the buffer. Times are any one clock's.
struct BottleneckQueue {
    let bottleneck: Bottleneck
    private var busyUntil: TimeAmount = .zero
    /// Packets dropped because the queue was full (congestion, not the links' loss).
    private(set) var drops = 0

    init(_ bottleneck: Bottleneck) { self.bottleneck = bottleneck }

    /// A packet of `size` bytes arrives at `now`: when it has been served, or nil if it is dropped.
    mutating func admit(size: Int, at now: TimeAmount) -> TimeAmount? {
        let start = max(busyUntil, now)
        guard start - now <= bottleneck.bufferTime else {
            drops += 1
            return nil
        }
        busyUntil = start + .nanoseconds(Int64(Double(size) / bottleneck.bytesPerSecond * 1e9))
        return busyUntil
    }

    /// How long a packet arriving at `now` would wait.
    func delay(at now: TimeAmount) -> TimeAmount { max(busyUntil - now, .zero) }
}

/// One direction of the file lab's path, in virtual time: an optional bottleneck (a FIFO that
/// serves `bytesPerSecond` and drops what would wait longer than its buffer), then the first
/// access link (the sending client's), then the second (the receiving client's), each the
/// scenario's `ImpairedLink` model through a `SimLink`. Datagrams may be duplicated and
/// reordered by the links; TCP segments are only lost and delayed, as in the lab's TCP model.
final class FilePathDirection {
    private let queue: EventQueue
    private var bottleneck: BottleneckQueue?
    private var hops: [SimLink] = []
    private var packets: [UInt64: (hop: Int, arrive: () -> Void)] = [:]
    private var nextPacket: UInt64 = 0
    /// Packets the bottleneck's queue dropped (congestion, not the links' loss).
    var queueDrops: Int { bottleneck?.drops ?? 0 }
    /// Bytes offered to the path.
    private(set) var bytesOffered = 0

    init(first: LinkConditions, second: LinkConditions, bottleneck: Bottleneck?, seed: UInt64, stream: UInt64, queue: EventQueue) {
        self.queue = queue
        self.bottleneck = bottleneck.map(BottleneckQueue.init)
        hops = [first, second].enumerated().map { index, conditions in
            SimLink(conditions: conditions, random: SeededRandom(seed: seed, stream: stream * 2 + UInt64(index)), queue: queue) { .zero }
        }
    }

    /// How long the bottleneck's queue holds a packet arriving now.
    var queueDelay: TimeAmount { bottleneck?.delay(at: queue.now) ?? .zero }

    /// Sends a packet of `size` bytes; `arrive` runs for each copy that reaches the far end.
    /// `segment`: a TCP segment (no duplication or reordering).
    func send(size: Int, segment: Bool = false, arrive: @escaping () -> Void) {
        bytesOffered += size
        var leaves = queue.now
        if bottleneck != nil {
            guard let served = bottleneck?.admit(size: size, at: queue.now) else { return }
            leaves = served
        }
        queue.schedule(at: leaves) { [self] in enter(hop: 0, segment: segment, arrive: arrive) }
    }

    private func enter(hop: Int, segment: Bool, arrive: @escaping () -> Void) {
        guard hop < hops.count else { return arrive() }
        if segment {
            hops[hop].sendSegment { [self] in enter(hop: hop + 1, segment: true, arrive: arrive) }
            return
        }
        nextPacket += 1
        packets[nextPacket] = (hop, arrive)
        var id = ByteBuffer()
        id.writeInteger(nextPacket)
        hops[hop].send(id) { [self] bytes in
            guard let packet = bytes.getInteger(at: bytes.readerIndex, as: UInt64.self), let entry = packets[packet] else { return }
            enter(hop: entry.hop + 1, segment: false, arrive: entry.arrive)
        }
    }
}
