import NIOCore
import SIMPCore

/// One direction of a simulated path for file-transfer tests: a bottleneck of `rate` datagrams
/// a second with a drop-tail queue of `queueLimit`, then `delay`; each datagram is lost with
/// probability `loss`, duplicated with `duplicate`, and delayed by up to three times `delay`
/// more (so it arrives out of order) with `reorder`. During `outage` (a relay down) nothing
/// gets through.
struct VirtualLink {
    var delay: TimeAmount = .milliseconds(10)
    var loss = 0.0
    var duplicate = 0.0
    var reorder = 0.0
    var rate: Int64? = nil
    var queueLimit: Int64 = 200
    var outage: Range<NIODeadline>? = nil
    var busyUntil = NIODeadline.uptimeNanoseconds(0)
    /// Datagrams the queue dropped (congestion, not random loss).
    var queueDrops = 0

    /// When the copies of a datagram sent at `now` arrive (none if it was lost).
    mutating func transmit(now: NIODeadline, random: inout SplitMix64) -> [NIODeadline] {
        if let outage, outage.contains(now) { return [] }
        var leaves = now
        if let rate {
            let service = TimeAmount.nanoseconds(1_000_000_000 / rate)
            let start = max(busyUntil, now)
            guard (start - now).nanoseconds / service.nanoseconds < queueLimit else {
                queueDrops += 1
                return []
            }
            busyUntil = start + service
            leaves = busyUntil
        }
        guard Double.random(in: 0..<1, using: &random) >= loss else { return [] }
        var arrivals = [leaves + delay + extra(&random)]
        if Double.random(in: 0..<1, using: &random) < duplicate { arrivals.append(leaves + delay + extra(&random)) }
        return arrivals
    }

    private func extra(_ random: inout SplitMix64) -> TimeAmount {
        guard Double.random(in: 0..<1, using: &random) < reorder else { return .zero }
        return .nanoseconds(Int64.random(in: 0...(3 * delay.nanoseconds), using: &random))
    }
}

/// A whole transfer between a `FileSender` and a `FileReceiver` over two `VirtualLink`s in
/// virtual time: chunks sealed and opened for real, plaintext written into a buffer, the
/// digest checked before the receiver says `fileDone`.
struct VirtualTransfer {
    let file: [UInt8]
    let offer: FileReceiver.Offer
    var sender: FileSender
    var receiver: FileReceiver
    var forward: VirtualLink
    var backward: VirtualLink
    var random: SplitMix64
    var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
    /// The receiver's file as written so far.
    var written: [UInt8]
    /// Plaintext bytes the sender put on the wire (retransmissions included).
    var bytesSent: UInt64 = 0
    private var events = EventQueue()
    private let cipher: FileChunkCipher

    init(size: Int, chunkSize: Int = 1100, forward: VirtualLink, backward: VirtualLink = VirtualLink(), seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let file = (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
        let key = FileChunkCipher.newKey(using: &random)
        self.file = file
        self.random = random
        offer = FileReceiver.Offer(
            fileId: 42, sender: "alice", name: "f", size: UInt64(size), chunkSize: chunkSize, key: key, digest: FileDigest.of(file))
        cipher = FileChunkCipher(key: key, fileId: 42)
        sender = FileSender(fileId: 42, chunkCount: offer.chunkCount, now: now)
        receiver = FileReceiver(offer: offer, device: "phone", instance: 1)
        written = [UInt8](repeating: 0, count: size)
        self.forward = forward
        self.backward = backward
    }

    /// Runs until the sender is done or `limit` of virtual time has passed; returns whether it finished.
    mutating func run(for limit: TimeAmount = .seconds(600), until stop: (VirtualTransfer) -> Bool = { _ in false }) -> Bool {
        let end = now + limit
        while !sender.isDone, now < end, !stop(self) {
            for transmission in sender.poll(now: now) { sendChunk(transmission) }
            if let ack = receiver.pollAck(from: "bob", now: now) { sendAck(ack) }
            let next = [events.earliest, sender.nextDeadline, receiver.nextDeadline].compactMap { $0 }.min()
            guard let next else { return false }
            now = max(now, next)
            deliverDue()
        }
        return sender.isDone
    }

    /// The receiver is killed and restarted as a new instance holding only `kept` of its chunks.
    mutating func restartReceiver(keeping kept: ChunkRanges, instance: UInt64) {
        receiver = FileReceiver(offer: offer, device: "phone", instance: instance, received: kept)
    }

    /// The sender is killed and started again (resuming, as `simp send` does from its record)
    /// and announces the file again; what is on the links stays there.
    mutating func restartSender() {
        sender = FileSender(fileId: 42, chunkCount: offer.chunkCount, resuming: true, now: now)
        receiver.announcedAgain()
    }

    private mutating func sendChunk(_ transmission: FileSender.Transmission) {
        let start = Int(transmission.chunk) * offer.chunkSize
        let plaintext = file[start..<min(start + offer.chunkSize, file.count)]
        bytesSent += UInt64(plaintext.count)
        let message = SIMPMessage.fileChunk(
            cipher.seal(Array(plaintext), index: transmission.chunk), index: transmission.chunk, number: transmission.number, fileId: 42,
            from: "alice", to: "bob")
        for arrival in forward.transmit(now: now, random: &random) { schedule(message, at: arrival) }
    }

    private mutating func sendAck(_ ack: SIMPMessage) {
        for arrival in backward.transmit(now: now, random: &random) { schedule(ack, at: arrival) }
    }

    private mutating func schedule(_ message: SIMPMessage, at time: NIODeadline) {
        events.push(message, at: time)
    }

    private mutating func deliverDue() {
        while let message = events.pop(dueBy: now) {
            if message.kind == .fileAck {
                sender.acknowledgement(message, now: now)
                continue
            }
            let arrival = receiver.chunkArrived(message, now: now)
            if arrival == .duplicate, receiver.isComplete { sendAck(receiver.done(from: "bob")) }
            guard case .write(let offset, let plaintext) = arrival else { continue }
            written.replaceSubrange(Int(offset)..<(Int(offset) + plaintext.count), with: plaintext)
            if receiver.isComplete, FileDigest.of(written) == offer.digest { sendAck(receiver.done(from: "bob")) }
        }
    }
}

/// Messages on the links, by arrival time (ties in the order sent): a binary heap, so that a
/// transfer of thousands of chunks in flight stays quick in a debug build.
private struct EventQueue {
    private var heap: [(at: NIODeadline, order: Int)] = []
    private var messages: [Int: SIMPMessage] = [:]
    private var order = 0

    var earliest: NIODeadline? { heap.first?.at }

    mutating func push(_ message: SIMPMessage, at time: NIODeadline) {
        order += 1
        messages[order] = message
        heap.append((time, order))
        var child = heap.count - 1
        while child > 0, Self.before(heap[child], heap[(child - 1) / 2]) {
            heap.swapAt(child, (child - 1) / 2)
            child = (child - 1) / 2
        }
    }

    mutating func pop(dueBy now: NIODeadline) -> SIMPMessage? {
        guard let first = heap.first, first.at <= now else { return nil }
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        var parent = 0
        while true {
            var smallest = parent
            for child in [2 * parent + 1, 2 * parent + 2] where child < heap.count && Self.before(heap[child], heap[smallest]) { smallest = child }
            if smallest == parent { break }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
        return messages.removeValue(forKey: first.order)
    }

    private static func before(_ a: (at: NIODeadline, order: Int), _ b: (at: NIODeadline, order: Int)) -> Bool {
        (a.at, a.order) < (b.at, b.order)
    }
}
