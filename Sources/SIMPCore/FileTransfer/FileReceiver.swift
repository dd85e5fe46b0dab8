import NIOCore

/// The receiving side of one file transfer, sans-I/O (docs/PROTOCOL.md §5.6): opens each chunk
/// with the file's key, says where its plaintext goes, keeps the set of chunks held, and
/// decides when a FILE_ACK goes back. The shell writes the plaintext into a `.part` file, saves
/// `received` from time to time (so a restarted receiver resumes), checks the digest once
/// `isComplete`, and only then presents the file.
///
/// Acknowledgements are batched: one goes after every `ackEvery` new chunks, or `ackDelay`
/// after the first chunk not yet acknowledged; at once when a chunk arrives out of order (a
/// gap opened or closed: the sender should learn of a loss quickly), for a duplicate (the
/// sender may have missed the last acknowledgement), and when the file is complete.
public struct FileReceiver: Sendable {
    /// A file announced to this device: what its end-to-end announcement said.
    public struct Offer: Equatable, Sendable {
        public var fileId: UInt64
        /// Who sends it.
        public var sender: String
        public var name: String
        public var size: UInt64
        public var chunkSize: Int
        public var key: [UInt8]
        public var digest: [UInt8]

        public init(fileId: UInt64, sender: String, name: String, size: UInt64, chunkSize: Int, key: [UInt8], digest: [UInt8]) {
            self.fileId = fileId
            self.sender = sender
            self.name = name
            self.size = size
            self.chunkSize = chunkSize
            self.key = key
            self.digest = digest
        }

        /// The offer in an opened end-to-end message (its `fileId` set), or nil when the
        /// message announces no file or the announcement is malformed.
        public init?(_ message: SIMPMessage) {
            guard message.fileId != 0, message.fileKey.count == FileChunkCipher.keySize, message.fileDigest.count == 32,
                message.fileChunkSize > 0, message.fileChunkSize <= 65_536
            else { return nil }
            self.init(
                fileId: message.fileId, sender: message.fromUser, name: message.content, size: message.fileSize,
                chunkSize: Int(message.fileChunkSize), key: message.fileKey, digest: message.fileDigest)
        }

        /// How many chunks the file has.
        public var chunkCount: UInt64 { FileSender.chunkCount(size: size, chunkSize: chunkSize) }
    }

    /// What became of a FILE_CHUNK.
    public enum Arrival: Equatable, Sendable {
        /// New: write `plaintext` at byte `offset` of the file.
        case write(offset: UInt64, plaintext: [UInt8])
        /// Held already.
        case duplicate
        /// Not authentic, out of range or the wrong length: dropped.
        case rejected(String)
    }

    /// Tunables of the receiver.
    public struct Configuration: Sendable {
        public var ackEvery = 8
        public var ackDelay: TimeAmount = .milliseconds(5)
        /// The most ranges one FILE_ACK reports.
        public var maxRanges = 64
        public init() {}
    }

    public let offer: Offer
    /// The chunks held.
    public private(set) var received: ChunkRanges
    /// This receiver's instance: FILE_ACKs carry it (`stream`), so the sender notices a restart.
    public let instance: UInt64
    /// The receiving device's name (FILE_ACKs carry it).
    public let device: String
    public let configuration: Configuration
    private let cipher: FileChunkCipher
    private var newestNumber: UInt64 = 0
    /// When the transmission numbered `newestNumber` arrived: the hold time is measured from it.
    private var newestArrivedAt: NIODeadline?
    private var unacknowledged = 0
    private var firstUnacknowledgedAt: NIODeadline?
    private var ackNow = false

    /// A receiver of `offer` on `device`, holding `received` already (a resumed transfer).
    public init(
        offer: Offer, device: String = "", instance: UInt64, received: ChunkRanges = ChunkRanges(), configuration: Configuration = Configuration()
    ) {
        self.offer = offer
        self.device = device
        self.instance = instance
        self.received = received
        self.configuration = configuration
        self.cipher = FileChunkCipher(key: offer.key, fileId: offer.fileId)
        self.ackNow = true // the first FILE_ACK tells the sender where to start
    }

    /// Whether every chunk is held (the digest is the shell's to check).
    public var isComplete: Bool { received.covers(offer.chunkCount) }

    /// How many plaintext bytes are held.
    public var bytesHeld: UInt64 {
        received.ranges.reduce(0) { total, range in
            total + min(range.upperBound * UInt64(offer.chunkSize), offer.size) - range.lowerBound * UInt64(offer.chunkSize)
        }
    }

    /// A FILE_CHUNK of this file arrived.
    public mutating func chunkArrived(_ message: SIMPMessage, now: NIODeadline) -> Arrival {
        let index = message.chunkIndex
        guard index < offer.chunkCount else { return .rejected("chunk \(index) of a file of \(offer.chunkCount) chunks") }
        if message.fileSeq > newestNumber {
            newestNumber = message.fileSeq
            newestArrivedAt = now
        }
        guard !received.contains(index) else {
            ackNow = true
            return .duplicate
        }
        let plaintext: [UInt8]
        do { plaintext = try cipher.open(message.chunk, index: index) } catch { return .rejected("chunk \(index) is not authentic") }
        let offset = index * UInt64(offer.chunkSize)
        guard UInt64(plaintext.count) == min(UInt64(offer.chunkSize), offer.size - offset) else {
            return .rejected("chunk \(index) has \(plaintext.count) bytes")
        }
        let inOrder = received.ranges.last.map { $0.upperBound == index } ?? (index == 0)
        received.insert(index)
        unacknowledged += 1
        if firstUnacknowledgedAt == nil { firstUnacknowledgedAt = now }
        if !inOrder || unacknowledged >= configuration.ackEvery || isComplete { ackNow = true }
        return .write(offset: offset, plaintext: plaintext)
    }

    /// The sender announced the file again (it was started again and asks what is held): the
    /// next `pollAck` answers at once.
    public mutating func announcedAgain() { ackNow = true }

    /// Whether an acknowledgement is due now (`pollAck` returns one).
    public func ackDue(now: NIODeadline) -> Bool { ackNow || (nextDeadline.map { $0 <= now } ?? false) }

    /// When `pollAck` should be called next (nil: when a chunk arrives).
    public var nextDeadline: NIODeadline? {
        firstUnacknowledgedAt.map { $0 + configuration.ackDelay }
    }

    /// The FILE_ACK to send now, if one is due. `from` is this user, the sender its `toUser`.
    public mutating func pollAck(from user: String, now: NIODeadline) -> SIMPMessage? {
        guard ackDue(now: now) else { return nil }
        let held = newestArrivedAt.map { now - $0 } ?? .zero
        ackNow = false
        unacknowledged = 0
        firstUnacknowledgedAt = nil
        var ack = acknowledgement(from: user)
        ack.holdMicros = UInt32(clamping: held.nanoseconds / 1000)
        return ack
    }

    /// The FILE_ACK saying the file is complete and its digest matched (`fileDone`).
    public func done(from user: String) -> SIMPMessage {
        var ack = acknowledgement(from: user)
        ack.fileDone = true
        return ack
    }

    /// The FILE_ACK refusing the file, with `reason` (FILE_REFUSED).
    public func refusal(_ reason: String, from user: String) -> SIMPMessage {
        var ack = acknowledgement(from: user)
        ack.errorCode = .fileRefused
        ack.errorText = reason
        return ack
    }

    private func acknowledgement(from user: String) -> SIMPMessage {
        var ack = SIMPMessage(kind: .fileAck, fromUser: user, toUser: offer.sender)
        ack.fileId = offer.fileId
        ack.fileRanges = ChunkRanges(received.reported(limit: configuration.maxRanges)).wireForm
        ack.fileSeq = newestNumber
        ack.stream = instance
        ack.device = device
        return ack
    }
}
