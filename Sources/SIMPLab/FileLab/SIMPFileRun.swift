import NIOCore
import SIMPCore

/// One file transfer over SIMP's datagram path in virtual time, as the file lab runs it: the
/// real `FileSender` (its `CubicWindow`, loss detection and timeouts) and `FileReceiver`, chunks
/// sealed and opened with `FileChunkCipher`, FILE_ACKs back; chat messages from the same sender
/// every `chatInterval` through the real `ReliableSender`, receipted by the receiver, sharing
/// the bottleneck with the chunks. Sizes on the wire are the payload plus `datagramOverhead`.
final class SIMPFileRun {
    /// Bytes a datagram adds to its payload on the wire: the message's fields, the seal and the chunk's tag, UDP and IP.
    static let datagramOverhead = 104
    static let chunkSize = 1100
    static let chatPayload = 32

    private let queue = EventQueue()
    private let forward: FilePathDirection
    private let backward: FilePathDirection
    private let fileBytes: Int
    private var sender: FileSender?
    private var receiver: FileReceiver?
    private let cipher: FileChunkCipher
    private var plaintext: [UInt8]
    private var chat = ReliableSender(firstMessageId: 1)
    private let chatInterval: TimeAmount?
    private var chatSentAt: [UInt64: TimeAmount] = [:]
    private var chatLatencies: [TimeAmount] = []
    private var progress = ProgressLog()
    private var completedAt: TimeAmount?
    private var wakeAt: TimeAmount?
    private var receiverWakeAt: TimeAmount?
    private var chatWakeAt: TimeAmount?
    private var payloadSent = 0
    /// Chat messages to send when there is no file (the baseline run).
    private let chatOnlyCount: Int

    /// A run of `fileBytes` (0: chat alone, `chatOnlyCount` messages) over `path`.
    init(path: FilePathSetup, fileBytes: Int, chatInterval: TimeAmount?, chatOnlyCount: Int = 0, seed: UInt64) {
        forward = path.direction(.forward, seed: seed, queue: queue)
        backward = path.direction(.backward, seed: seed, queue: queue)
        self.fileBytes = fileBytes
        self.chatInterval = chatInterval
        self.chatOnlyCount = chatOnlyCount
        var random = SeededRandom(seed: seed, stream: 99)
        let key = FileChunkCipher.newKey(using: &random)
        cipher = FileChunkCipher(key: key, fileId: 7)
        plaintext = (0..<Self.chunkSize).map { _ in UInt8.random(in: 0...255, using: &random) }
        guard fileBytes > 0 else { return }
        let offer = FileReceiver.Offer(
            fileId: 7, sender: "alice", name: "lab", size: UInt64(fileBytes), chunkSize: Self.chunkSize, key: key,
            digest: [UInt8](repeating: 0, count: 32))
        sender = FileSender(fileId: 7, chunkCount: offer.chunkCount, now: queue.deadline)
        receiver = FileReceiver(offer: offer, device: "phone", instance: 1)
    }

    func run(limit: TimeAmount) -> TransferResult {
        if sender != nil { serviceSender() }
        if let chatInterval { sendChat(every: chatInterval, index: 0) }
        _ = queue.run(until: limit, stop: { [self] in finished }, checkEvery: 100_000)
        let done = completedAt ?? (fileBytes == 0 ? queue.now : nil)
        return TransferResult(
            fileBytes: fileBytes, completedAfter: done, payloadBytesSent: payloadSent, wireBytesSent: forward.bytesOffered,
            queueDrops: forward.queueDrops, retransmissions: Int(sender?.retransmissions ?? 0), timeouts: Int(sender?.timeouts ?? 0),
            largestWindow: Int(sender?.congestion.largestWindow ?? 0), lossesTolerated: sender?.congestion.lossesTolerated ?? 0,
            progress: progress.points, chatLatencies: chatLatencies)
    }

    private var finished: Bool {
        if fileBytes > 0 { return sender?.isDone == true }
        return chatLatencies.count >= chatOnlyCount && chat.inFlightCount == 0
    }

    // MARK: The file

    private func serviceSender() {
        guard var sender else { return }
        let now = queue.deadline
        for transmission in sender.poll(now: now) {
            let start = Int(transmission.chunk) * Self.chunkSize
            let length = min(Self.chunkSize, fileBytes - start)
            payloadSent += length
            let message = SIMPMessage.fileChunk(
                cipher.seal(Array(plaintext.prefix(length)), index: transmission.chunk), index: transmission.chunk,
                number: transmission.number, fileId: 7, from: "alice", to: "bob")
            forward.send(size: length + Self.datagramOverhead) { [self] in chunkArrived(message) }
        }
        let next = sender.nextDeadline.map(queue.time(of:))
        self.sender = sender
        if let next, next != wakeAt {
            wakeAt = next
            queue.schedule(at: next) { [self] in
                guard wakeAt == next else { return }
                wakeAt = nil
                serviceSender()
            }
        }
    }

    private func chunkArrived(_ message: SIMPMessage) {
        guard var receiver else { return }
        let arrival = receiver.chunkArrived(message, now: queue.deadline)
        if case .write = arrival { progress.record(held: receiver.bytesHeld, at: queue.now, total: UInt64(fileBytes)) }
        if receiver.isComplete, completedAt == nil { completedAt = queue.now }
        self.receiver = receiver
        serviceReceiver(done: receiver.isComplete && (arrival == .duplicate || completedAt == queue.now))
    }

    private func serviceReceiver(done: Bool = false) {
        guard var receiver else { return }
        let now = queue.deadline
        var acks: [SIMPMessage] = []
        if let ack = receiver.pollAck(from: "bob", now: now) { acks.append(ack) }
        if done { acks.append(receiver.done(from: "bob")) }
        self.receiver = receiver
        for ack in acks {
            backward.send(size: 40 + Self.datagramOverhead) { [self] in
                sender?.acknowledgement(ack, now: queue.deadline)
                serviceSender()
            }
        }
        if let next = receiver.nextDeadline.map(queue.time(of:)), next != receiverWakeAt {
            receiverWakeAt = next
            queue.schedule(at: next) { [self] in
                guard receiverWakeAt == next else { return }
                receiverWakeAt = nil
                serviceReceiver()
            }
        }
    }

    // MARK: Chat beside it

    private func sendChat(every interval: TimeAmount, index: Int) {
        let transferring = fileBytes > 0 ? completedAt == nil : index < chatOnlyCount
        guard transferring else { return }
        let message = SIMPMessage(kind: .text, fromUser: "alice", toUser: "bob", content: String(repeating: "x", count: Self.chatPayload))
        let (id, output) = chat.submit(message, now: queue.deadline)
        chatSentAt[id] = queue.now
        carry(output)
        queue.schedule(after: interval) { [self] in sendChat(every: interval, index: index + 1) }
    }

    private func carry(_ output: SenderOutput) {
        for message in output.transmit {
            forward.send(size: Self.chatPayload + Self.datagramOverhead) { [self] in
                if let sent = chatSentAt.removeValue(forKey: message.messageId) { chatLatencies.append(queue.now - sent) }
                let receipt = message.receipt(holdMicros: 0)
                backward.send(size: Self.datagramOverhead) { [self] in carry(chat.handleReceipt(receipt, now: queue.deadline)) }
            }
        }
        guard let next = chat.nextDeadline.map(queue.time(of:)), next != chatWakeAt else { return }
        chatWakeAt = next
        queue.schedule(at: next) { [self] in
            guard chatWakeAt == next else { return }
            chatWakeAt = nil
            carry(chat.poll(now: queue.deadline))
        }
    }
}

/// Bytes held at the receiver against time, one point per 1/400 of the file.
struct ProgressLog {
    private(set) var points: [TransferResult.Progress] = []

    mutating func record(held: UInt64, at time: TimeAmount, total: UInt64) {
        let step = max(total / 400, 1)
        guard held / step > (points.last?.bytes ?? 0) / step || held == total || points.isEmpty else { return }
        points.append(.init(seconds: Double(time.nanoseconds) / 1e9, bytes: held))
    }
}
