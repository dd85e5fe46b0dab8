import Foundation
import NIOCore
import SIMPCore

/// Sends one file to a user (docs/PROTOCOL.md §5.6): announces it end to end, then drives a
/// `FileSender` in real time, reading and sealing the chunks it asks for, until the receiver
/// says it has the whole file and the digest matched. The file is read from disk as the chunks
/// are asked for, one `readWindow` at a time (its SHA-256 first, the same way), so a file of any
/// size takes about one window of memory. It sleeps until the sender's
/// `nextDeadline` and wakes early when an acknowledgement arrives.
///
/// The transfer is kept in an `OutgoingFileRecord` under `$SIMP_HOME` until it completes: the
/// same file sent to the same user again (after this process was killed) resumes it with the
/// same file id and key, and the receiver's answer to the repeated announcement says which
/// chunks it still lacks.
///
/// An announcement the relay stored (the receiver is offline, or has several devices) sends
/// the chunks to the relay to hold instead (`FileDestination`): the transfer is done once the
/// relay holds the whole file, and each device of the receiver gets it from there.
///
/// The id and key of a file the relay held whole are kept (`$SIMP_HOME/held-files/`, by the
/// file's SHA-256): the same file sent to someone else is first granted to them from the
/// relay's copy (FILE_GRANT) and only announced, not uploaded again, when the relay still has it.
/// The transfers of one room send share one id, key and upload (`SharedFileUpload`).
public actor FileSend {
    /// How far a transfer is.
    public struct Progress: Sendable {
        /// Bytes the receiver has acknowledged.
        public var bytesAcknowledged: UInt64
        public var size: UInt64
        /// Chunk bytes sent, retransmissions included.
        public var bytesSent: UInt64
        public var elapsed: TimeAmount
        /// Chunks sent again, declared lost, and retransmission timeouts.
        public var retransmissions: UInt64 = 0
        public var losses: UInt64 = 0
        public var timeouts: UInt64 = 0
        /// The largest congestion window, in bytes (what one window may send twice).
        public var largestWindowBytes: UInt64 = 0
        /// Whether this run resumed a transfer an earlier run started.
        public var resumed = false
        /// Whether the relay holds the whole file for the receiver, who is offline (docs/PROTOCOL.md
        /// §5.7): the receiver gets it when it connects.
        public var heldByRelay = false
        /// With `heldByRelay`: some device of the receiver was online (it gets the file as the
        /// relay stores it; the receiver's other devices when they connect).
        public var receiverOnline = false
        /// Why the relay would not hold the file, when it went live to the receiver's devices
        /// online instead (those offline do not get it).
        public var notHeldBecause: String?
        /// Forwarded from the relay's copy of an earlier upload of the same file (nothing sent
        /// but the announcement): the receiver's devices get it from the relay.
        public var forwarded = false
        /// Of `bytesAcknowledged`, what the receiver held from an earlier run when this one
        /// resumed: left out of the rate, which is this run's.
        public var bytesHeldBefore: UInt64 = 0
        /// The file's id (what the relay's news that the receiver got a held file names, §5.7).
        public var fileId: UInt64 = 0

        /// `12.1 MB of 20.0 MB, 45.3 MB/s, ETA 0.2 s (sent 12.3 MB)`: the rate is this run's
        /// (bytes acknowledged since it started over its time), also after a resume.
        public var line: String {
            let seconds = max(Double(elapsed.nanoseconds) / 1e9, 1e-3)
            let rate = Double(bytesAcknowledged - min(bytesHeldBefore, bytesAcknowledged)) / seconds
            let left = Double(size - min(bytesAcknowledged, size))
            let eta = rate > 0 ? String(format: "%.1f s", left / rate) : "unknown"
            func megabytes(_ bytes: UInt64) -> String { String(format: "%.1f MB", Double(bytes) / 1e6) }
            return "\(megabytes(bytesAcknowledged)) of \(megabytes(size)), " + String(format: "%.1f MB/s", rate / 1e6)
                + ", ETA \(eta) (sent \(megabytes(bytesSent)))"
        }
    }

    /// Why a transfer did not complete.
    public enum Failure: Error, CustomStringConvertible, Equatable {
        case notEndToEnd
        case unreadable(String)
        case announcementNotDelivered(String)
        case refused(String)
        case stalled(seconds: Int)
        /// The file could not be read while sending (removed, truncated, an I/O error).
        case readFailed(String)

        public var description: String {
            switch self {
            case .notEndToEnd: "files need end-to-end encryption (without it the file's key would travel in clear): drop --no-e2e"
            case .unreadable(let why): "cannot read the file: \(why)"
            case .announcementNotDelivered(let why): "the file's announcement was not delivered: \(why)"
            case .refused(let why): why // it says who refused: the receiver, or the relay that would hold the file
            case .stalled(let seconds): "nothing was acknowledged for \(seconds) s: the receiver is gone; sending stopped"
            case .readFailed(let why): "reading the file failed while sending it: \(why)"
            }
        }
    }

    /// Plaintext bytes per chunk: a FILE_CHUNK datagram stays near 1,200 bytes.
    public static let chunkSize = 1100
    /// Bytes of the file read at once and kept while its chunks are sent: 1,024 chunks (1.1 MB).
    public static let readWindow = 1024 * chunkSize

    private let client: SIMPClient
    private let peer: String
    /// The room the file was sent to (`RoomFileSend`), said inside the announcement; empty: to `peer` alone.
    private let room: String
    private let name: String
    private let file: FileHandle
    private let size: UInt64
    private let digest: [UInt8]
    private var fileId: UInt64
    private var key: [UInt8]
    /// The chunks, read a window at a time and sealed with the file's key.
    private var chunks: FileChunkSource
    private let recordPath: URL
    /// The record of this file's id and key once the relay held it whole (for forwarding).
    private let heldPath: URL
    /// Such a record, when this run may forward the relay's copy instead of uploading.
    private var forwardable: OutgoingFileRecord?
    private var forwarded = false
    /// The room send's one upload this transfer takes part in (nil: its own id, key and upload).
    private let shared: SharedFileUpload?
    /// Waiting for the relay's answer to a FILE_GRANT, and that answer.
    private var granting = false
    private var grantAnswer: SIMPMessage?
    /// Whether an earlier run left this transfer's record (this one resumes it).
    public nonisolated let resumes: Bool
    private var sender: FileSender
    /// Live to the receiver, or to the relay to hold (FILE_UPLOAD): the announcement's outcome decides.
    private var destination = FileDestination.receiver
    private var notHeldBecause: String?
    /// Acknowledgements (a quick refusal) that came before the announcement's receipt, when the
    /// sender is made anew: given to it then.
    private var early: [SIMPMessage]? = []
    /// The run loop's sleep, ended early by an acknowledgement.
    private var wakeUp: CheckedContinuation<Void, Never>?

    /// A transfer of the file at `path` to `peer` through `client` (connected); the record of a
    /// transfer under way lives under `home`. With `room` (its name, no `#`), the announcement
    /// says, end to end, that the file was sent to that room (docs/E2E.md §17).
    /// The file is opened and its SHA-256 computed here (reading it once, a window at a time).
    /// With `shared`, a new transfer (not one resumed or forwarded) takes its id and key and
    /// uploads through it.
    public init(
        client: SIMPClient, path: String, to peer: String, room: String = "", shared: SharedFileUpload? = nil,
        home: URL = SIMPHome.directory()
    ) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { throw Failure.unreadable("\(path) does not exist") }
        guard !isDirectory.boolValue else { throw Failure.unreadable("\(path) is a directory") }
        guard let file = FileHandle(forReadingAtPath: path) else { throw Failure.unreadable("\(path) is not readable") }
        var digest = FileDigest()
        var size: UInt64 = 0
        do {
            while let data = try file.read(upToCount: Self.readWindow), !data.isEmpty {
                digest.update(Array(data))
                size += UInt64(data.count)
            }
        } catch {
            try? file.close()
            throw Failure.unreadable("\(path): \(error.localizedDescription)")
        }
        self.client = client
        self.peer = peer
        self.room = room
        self.name = URL(fileURLWithPath: path).lastPathComponent
        self.file = file
        self.size = size
        self.digest = digest.finalize()
        self.recordPath = OutgoingFileRecord.path(home: home, user: client.configuration.user, peer: peer, digest: self.digest)
        let record = OutgoingFileRecord.read(recordPath).flatMap { $0.fits(size: size, chunkSize: Self.chunkSize) }
        self.heldPath = OutgoingFileRecord.heldPath(home: home, user: client.configuration.user, digest: self.digest)
        OutgoingFileRecord.pruneHeld(home: home) // a record older than the relay's retention names a file it deleted
        let held = record == nil ? OutgoingFileRecord.read(heldPath).flatMap { $0.fits(size: size, chunkSize: Self.chunkSize) } : nil
        self.forwardable = held
        var random = SystemRandomNumberGenerator()
        self.resumes = record != nil
        let shared = record == nil && held == nil ? shared : nil
        self.shared = shared
        self.fileId = record?.fileId ?? held?.fileId ?? shared?.fileId ?? UInt64.random(in: 1...UInt64.max, using: &random)
        self.key = record?.key ?? held?.key ?? shared?.key ?? FileChunkCipher.newKey(using: &random)
        self.chunks = FileChunkSource(file: file, size: size, fileId: fileId, cipher: FileChunkCipher(key: key, fileId: fileId), peer: peer)
        self.sender = FileSender(
            fileId: fileId, chunkCount: FileSender.chunkCount(size: size, chunkSize: Self.chunkSize), now: .now())
    }

    deinit { try? file.close() }

    /// The file's size in bytes.
    public var fileSize: UInt64 { size }

    /// Announces the file and sends it; returns once the receiver has it whole and verified.
    /// `progress` is called about four times a second. The acknowledgements come from
    /// `datagrams` (default: the client's `fileDatagrams`, which has one consumer: a client that
    /// also receives files, or sends several at once, shares it with a `FileDatagramRouter`).
    public func run(datagrams: AsyncStream<SIMPMessage>? = nil, progress: @escaping @Sendable (Progress) -> Void) async throws {
        guard client.configuration.endToEnd != nil else { throw Failure.notEndToEnd }
        let acks = Task { [datagrams = datagrams ?? client.fileDatagrams] in
            for await message in datagrams where message.kind == .fileAck { self.acknowledged(message) }
        }
        defer { acks.cancel() }
        if forwardable != nil {
            if try await forwardFromTheRelaysCopy() { return progress(currentProgress(since: .now())) }
            newIdAndKey()
        }
        if shared == nil { try keepRecord() }
        let result = try await client.send(announcement())
        switch result {
        case .delivered: destination = .receiver
        // Offline, or several devices: the relay holds the file for every one of them.
        case .stored(_, let receiverOnline): destination = FileDestination(announcementStored: true, receiverOnline: receiverOnline)
        default: throw Failure.announcementNotDelivered(Self.whyNotDelivered(result))
        }
        if let shared {
            // Only the one upload of a room send is resumed; a member granted it has nothing to resume.
            let uploads = destination.uploads ? await shared.claimUpload() : false
            if destination.uploads, !uploads { return try await grantSharedUpload(shared, progress: progress) }
            try keepRecord()
            do { try await sendChunks(progress: progress) } catch {
                if uploads { await shared.uploadEnded(failure: "\(error)") }
                throw error
            }
            if uploads {
                await shared.uploadEnded(failure: sender.heldByRelay ? nil : notHeldBecause ?? "the relay does not hold it")
            }
            return
        }
        try await sendChunks(progress: progress)
    }

    /// Keeps the record that lets a later run resume this transfer.
    private func keepRecord() throws {
        do {
            try OutgoingFileRecord(fileId: fileId, key: key, size: size, chunkSize: Self.chunkSize).write(to: recordPath)
        } catch {
            throw Failure.unreadable("cannot keep the transfer's record (needed to resume it): \(error)")
        }
    }

    /// This member's announcement was stored and another transfer of the room send uploads
    /// the file: once the relay holds it whole, it is granted to this member (FILE_GRANT).
    private func grantSharedUpload(_ shared: SharedFileUpload, progress: @escaping @Sendable (Progress) -> Void) async throws {
        if let failure = await shared.heldWhole() { throw Failure.refused("the relay did not keep the room's one upload of the file: \(failure)") }
        guard let answer = await grant(), answer.fileDone, answer.errorCode == .none else {
            throw Failure.refused("the relay would not let \(peer) fetch its copy: \(grantAnswer?.errorText ?? "no answer")")
        }
        forwarded = true
        progress(currentProgress(since: .now()))
    }

    /// Sends the chunks the announcement's outcome calls for until the transfer is done.
    private func sendChunks(progress: @escaping @Sendable (Progress) -> Void) async throws {
        let start = NIODeadline.now()
        var reported = start
        sender = FileSender(fileId: fileId, chunkCount: sender.chunkCount, resuming: resumes, now: start)
        for ack in early ?? [] { take(ack, now: start) }
        early = nil
        var trace = FileSendTrace(start: start)
        while !sender.isDone {
            let now = NIODeadline.now()
            trace.wokeUp()
            if let refusal = sender.refusal {
                try? FileManager.default.removeItem(at: recordPath)
                throw Failure.refused(refusal)
            }
            if sender.stalled(now: now) { throw Failure.stalled(seconds: Int(sender.configuration.stallAfter.nanoseconds / 1_000_000_000)) }
            let messages = try sender.poll(now: now).map { try chunks.message(for: $0, upload: destination.uploads) }
            if !messages.isEmpty { await client.sendFileDatagrams(messages) }
            trace.sent(messages.count, sender: sender, now: now)
            if now - reported >= .milliseconds(250) {
                reported = now
                progress(currentProgress(since: start))
            }
            // Until the sender's next deadline, an acknowledgement, or the next progress report.
            await sleep(until: min(sender.nextDeadline ?? reported + .milliseconds(250), reported + .milliseconds(250)))
        }
        try? FileManager.default.removeItem(at: recordPath)
        if sender.heldByRelay {
            try? OutgoingFileRecord(fileId: fileId, key: key, size: size, chunkSize: Self.chunkSize, name: name).write(to: heldPath)
        }
        progress(currentProgress(since: start))
    }

    /// Why an announcement's outcome ends the transfer, as the user reads it ("no user \"bob\" is
    /// registered", "connection lost before the receipt; …"), not the outcome's Swift form.
    private static func whyNotDelivered(_ result: SendResult) -> String {
        if case .failed(_, let failure) = result { return "\(failure)" }
        return MessageFormatting.outcomeText(result)
    }

    /// Grants the peer the relay's copy of this file (held whole from an earlier upload to
    /// someone else) and announces it: true once done. False when the relay does not hold it
    /// any more or will not grant it (the record is forgotten; the file goes as usual).
    private func forwardFromTheRelaysCopy() async throws -> Bool {
        guard let answer = await grant(), answer.fileDone, answer.errorCode == .none else {
            try? FileManager.default.removeItem(at: heldPath)
            return false
        }
        let result = try await client.send(announcement())
        switch result {
        case .delivered, .stored: break
        default: throw Failure.announcementNotDelivered(Self.whyNotDelivered(result))
        }
        forwarded = true
        return true
    }

    /// Asks the relay to let the peer fetch its copy of this file (FILE_GRANT, up to 4 times,
    /// 500 ms apart): its answer, nil without one.
    private func grant() async -> SIMPMessage? {
        granting = true
        defer { granting = false }
        for _ in 0..<4 where grantAnswer == nil {
            await client.sendFileDatagrams([.fileGrant(fileId, to: peer, from: "")])
            await sleep(until: .now() + .milliseconds(500))
        }
        return grantAnswer
    }

    /// A new file id and key (the relay's copy could not be forwarded: it is held under the old id).
    private func newIdAndKey() {
        var random = SystemRandomNumberGenerator()
        fileId = UInt64.random(in: 1...UInt64.max, using: &random)
        key = FileChunkCipher.newKey(using: &random)
        chunks.fileId = fileId
        chunks.cipher = FileChunkCipher(key: key, fileId: fileId)
        sender = FileSender(fileId: fileId, chunkCount: sender.chunkCount, now: .now())
    }

    /// Sleeps until `deadline` or until `wake()`, whichever comes first.
    private func sleep(until deadline: NIODeadline) async {
        guard deadline > .now(), !sender.isDone, !(granting && grantAnswer != nil) else { return }
        let timer = Task { [weak self] in
            try? await Task.sleep(nanoseconds: UInt64(max((deadline - .now()).nanoseconds, 0)))
            guard !Task.isCancelled else { return }
            await self?.wake()
        }
        await withCheckedContinuation { wakeUp = $0 }
        timer.cancel()
    }

    private func wake() {
        wakeUp?.resume()
        wakeUp = nil
    }
    /// The transfer's figures now.
    private func currentProgress(since start: NIODeadline) -> Progress {
        let acknowledged = min(sender.acknowledged.count * UInt64(Self.chunkSize), size)
        return Progress(
            bytesAcknowledged: acknowledged, size: size, bytesSent: chunks.bytesSent, elapsed: .now() - start,
            retransmissions: sender.retransmissions, losses: sender.lossesDetected, timeouts: sender.timeouts,
            largestWindowBytes: UInt64(sender.congestion.largestWindow) * UInt64(Self.chunkSize), resumed: resumes,
            heldByRelay: sender.heldByRelay || forwarded, receiverOnline: destination == .relay(receiverOnline: true),
            notHeldBecause: notHeldBecause, forwarded: forwarded,
            bytesHeldBefore: min(sender.chunksHeldBefore * UInt64(Self.chunkSize), size), fileId: fileId)
    }

    private func acknowledged(_ ack: SIMPMessage) {
        // The transfers of a room send share the file's id: each follows its own member's.
        guard ack.fileId == fileId, ack.fromUser == peer else { return }
        if granting {
            guard ack.fileHeld, ack.fromUser == peer else { return }
            grantAnswer = ack
            return wake()
        }
        guard early == nil else { return early!.append(ack) }
        take(ack, now: .now())
        wake()
    }

    /// An acknowledgement of the path the chunks take goes to the sender; the relay's refusal
    /// to hold the file sends it live to the receiver's devices online, if any (a new sender).
    private func take(_ ack: SIMPMessage, now: NIODeadline) {
        guard destination.follows(ack) else { return }
        if ack.errorCode == .fileQuotaExceeded, let live = destination.afterRelayRefused {
            destination = live
            notHeldBecause = ack.errorText
            sender = FileSender(fileId: fileId, chunkCount: sender.chunkCount, resuming: resumes, now: now)
            return
        }
        sender.acknowledgement(ack, now: now)
    }

    private func announcement() -> SIMPMessage {
        var message = SIMPMessage(kind: .text, toUser: peer, content: name)
        message.fileId = fileId
        message.fileKey = key
        message.fileSize = size
        message.fileChunkSize = UInt32(Self.chunkSize)
        message.fileDigest = digest
        message.fileRoom = room
        return message
    }
}
