import Foundation
import NIOCore
import SIMPCore

/// Receives the files announced to this device into a downloads folder (docs/PROTOCOL.md
/// §5.6): one `FileReceiver` per file, chunks written into `.partial/ID.part`, the chunks held
/// saved beside it (`ID.json`, fsynced after the part file) every 256 chunks, so a receiver
/// killed and started again resumes from what it saved. A file is renamed into the folder,
/// under its sanitised name and never over another file, only once its SHA-256 matched; a
/// record of it (`.received/`, `ReceivedFile`) lets the same file from the same sender,
/// announced again later, be answered done at once while the saved copy is still there.
///
/// A file may be held by the relay for this device (its sender went while this device was
/// offline, or this user has another device offline, docs/PROTOCOL.md §5.7): each transfer asks
/// the relay for its chunks (`HeldFileFetcher`), less and less often while the relay says it
/// holds no such file, and tells the relay when the file is whole if a chunk came from it, so
/// it can delete its copy once every device of this user has the file.
public actor FileDownloads {
    /// A file received whole and verified.
    public struct Saved: Sendable, Equatable {
        public var name: String
        public var size: UInt64
        /// The SHA-256, hex.
        public var sha256: String
        public var path: String
        public var from: String
        /// The room it was sent to (no `#`), checked: the relay lists this user and the sender
        /// as its members (docs/E2E.md §17); empty: a direct file.
        public var room = ""
        /// Whether the file was here already (announced again by its sender, not received again).
        public var receivedBefore = false
    }

    /// What is kept of a transfer under way.
    private struct State: Codable {
        var fileId: UInt64, sender: String, name: String, size: UInt64, chunkSize: Int, key: [UInt8], digest: [UInt8]
        var ranges: [[UInt64]]
        var offer: FileReceiver.Offer {
            FileReceiver.Offer(fileId: fileId, sender: sender, name: name, size: size, chunkSize: chunkSize, key: key, digest: digest)
        }
    }

    private struct Transfer {
        var receiver: FileReceiver
        var handle: FileHandle
        var unsaved = 0
        /// Asks the relay for the chunks, in case it holds the file.
        var fetcher: HeldFileFetcher
    }

    private let client: SIMPClient
    private let user: String
    private let device: String
    private let directory: URL
    private let partial: URL
    /// The records of files received whole (`ReceivedFile`), one per sender and content.
    private let received: URL
    private let saved: @Sendable (Saved) -> Void
    private let failed: @Sendable (String) -> Void
    private var transfers: [UInt64: Transfer] = [:]
    /// Files completed in this run: a chunk of one arriving again is answered `fileDone` again.
    private var completed: [UInt64: FileReceiver] = [:]
    /// The checked room of each file announced in a room during this run, by file id.
    private var rooms: [UInt64: String] = [:]
    private let maxSize: UInt64
    /// Sends the acknowledgements a receiver delays (`FileReceiver.nextDeadline`): armed for the
    /// earliest one, none while no acknowledgement waits, so an idle listener never wakes.
    private var ackTimer: Task<Void, Never>?

    /// Downloads into `directory` (created if missing) for `client`'s user and device;
    /// `saved` hears of each file saved, `failed` of each that could not be.
    public init(
        client: SIMPClient, directory: String, maxSize: UInt64 = 4 << 30, saved: @escaping @Sendable (Saved) -> Void,
        failed: @escaping @Sendable (String) -> Void
    ) throws {
        self.client = client
        self.user = client.configuration.user
        self.device = client.configuration.device
        self.directory = URL(fileURLWithPath: directory)
        self.partial = self.directory.appendingPathComponent(".partial")
        self.received = self.directory.appendingPathComponent(".received")
        self.maxSize = maxSize
        self.saved = saved
        self.failed = failed
        try FileManager.default.createDirectory(at: partial, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: received, withIntermediateDirectories: true)
        ReceivedRecords.prune(received)
    }

    /// Resumes the transfers an earlier run left, then takes file datagrams until the client
    /// closes: from `datagrams` when given (a `FileDatagramRouter`'s `chunks`), else the client's.
    public func run(datagrams: AsyncStream<SIMPMessage>? = nil) async {
        resumeSaved()
        await sendDueAcks() // a resumed transfer tells its sender where to go on
        defer { ackTimer?.cancel() }
        for await message in datagrams ?? client.fileDatagrams {
            switch message.kind {
            case .fileChunk: await chunkArrived(message)
            case .fileAck: await relayAnswered(message)
            default: break
            }
        }
    }

    /// A delivered message: if it announces a file, the transfer starts (its first FILE_ACK
    /// tells the sender where to begin). Returns whether it was an announcement. The room it
    /// names is checked first (`SIMPClient.checkingFileRoom`) unless `roomChecked`.
    @discardableResult
    public func offered(_ message: SIMPMessage, roomChecked: Bool = false) async -> Bool {
        guard message.fileId != 0 else { return false }
        let message = roomChecked ? message : await client.checkingFileRoom(message)
        if !message.fileRoom.isEmpty { rooms[message.fileId] = message.fileRoom }
        guard let offer = FileReceiver.Offer(message) else {
            failed("a file from \(message.fromUser) was announced without a valid key, digest or chunk size: ignored")
            return true
        }
        if let done = completed[offer.fileId] {
            await client.sendFileDatagrams([done.done(from: user)]) // announced again: its sender restarted
            return true
        }
        if transfers[offer.fileId] != nil {
            transfers[offer.fileId]?.receiver.announcedAgain() // its sender restarted: say what is held
            await sendDueAcks()
            return true
        }
        if let earlier = await receivedBefore(offer) {
            let receiver = FileReceiver.holdingEverything(offer: offer, device: device, instance: UInt64.random(in: 1...UInt64.max))
            completed[offer.fileId] = receiver
            // The relay may hold a copy for this user's devices: this one needs none.
            await client.sendFileDatagrams([receiver.done(from: user), HeldFileFetcher(offer: offer).release()])
            saved(
                Saved(
                    name: URL(fileURLWithPath: earlier.path).lastPathComponent, size: offer.size, sha256: Self.hex(offer.digest),
                    path: earlier.path, from: offer.sender, room: rooms[offer.fileId] ?? "", receivedBefore: true))
            return true
        }
        let receiver = FileReceiver(offer: offer, device: device, instance: UInt64.random(in: 1...UInt64.max))
        guard offer.size <= maxSize else {
            await client.sendFileDatagrams([receiver.refusal("the file is larger than this device accepts (\(maxSize) bytes)", from: user)])
            failed("\(offer.sender)'s file \(offer.name) (\(offer.size) bytes) is larger than \(maxSize) bytes: refused")
            return true
        }
        guard start(receiver) else { // its sender is told at once rather than left to stall
            await client.sendFileDatagrams([receiver.refusal("cannot write the file into its downloads folder", from: user)])
            return true
        }
        await sendDueAcks()
        return true
    }

    /// The record of `offer`'s file if this device received it from the same sender before and
    /// the saved copy still has its SHA-256 (it may have been removed or changed since). The
    /// copy is hashed off the actor (seconds for a large file): chunks of other transfers go on.
    private func receivedBefore(_ offer: FileReceiver.Offer) async -> ReceivedFile? {
        let path = received.appendingPathComponent(ReceivedFile.recordName(sender: offer.sender, digest: offer.digest) + ".json")
        guard let data = FileManager.default.contents(atPath: path.path), let record = try? JSONDecoder().decode(ReceivedFile.self, from: data),
            record.isAnnounced(by: offer)
        else { return nil }
        let copy = URL(fileURLWithPath: record.path)
        guard await Task.detached(operation: { FileDownloads.digest(of: copy) }).value == offer.digest else { return nil }
        return record
    }

    /// Starts receiving into the part file; false (and the user told) if it cannot be written.
    @discardableResult
    private func start(_ receiver: FileReceiver) -> Bool {
        let part = partPath(receiver.offer.fileId)
        if !FileManager.default.fileExists(atPath: part.path) { _ = FileManager.default.createFile(atPath: part.path, contents: nil) }
        guard let handle = try? FileHandle(forUpdating: part) else {
            failed("cannot write \(part.path): \(receiver.offer.name) from \(receiver.offer.sender) not received")
            return false
        }
        transfers[receiver.offer.fileId] = Transfer(receiver: receiver, handle: handle, fetcher: HeldFileFetcher(offer: receiver.offer))
        save(receiver.offer.fileId)
        return true
    }

    private func resumeSaved() {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: partial.path)) ?? []
        for name in names where name.hasSuffix(".json") {
            guard let data = FileManager.default.contents(atPath: partial.appendingPathComponent(name).path),
                let state = try? JSONDecoder().decode(State.self, from: data)
            else { continue }
            let ranges = ChunkRanges(state.ranges.compactMap { $0.count == 2 && $0[0] < $0[1] ? $0[0]..<$0[1] : nil })
            start(FileReceiver(offer: state.offer, device: device, instance: UInt64.random(in: 1...UInt64.max), received: ranges))
        }
    }

    private func chunkArrived(_ message: SIMPMessage) async {
        let id = message.fileId, now = NIODeadline.now()
        if var done = completed[id] {
            if case .duplicate = done.chunkArrived(message, now: now) { await client.sendFileDatagrams([done.done(from: user)]) }
            return
        }
        guard transfers[id] != nil else { return }
        // Changed in place in the table: a copy taken out and put back would copy the set of
        // chunks held (shared with the table's copy) at every chunk.
        transfers[id]!.fetcher.chunkArrived(message, now: now)
        if case .write(let offset, let plaintext) = transfers[id]!.receiver.chunkArrived(message, now: now) {
            do { try PartFile.write(plaintext, at: offset, to: transfers[id]!.handle) } catch {
                let transfer = transfers[id]!
                return await fail(transfer, "cannot write \(transfer.receiver.offer.name): \(error.localizedDescription) (is the disk full?)")
            }
            transfers[id]!.unsaved += 1
        }
        if transfers[id]!.receiver.isComplete { return await finish(id) }
        if transfers[id]!.unsaved >= 256 { save(id) }
        if let ack = transfers[id]?.receiver.pollAck(from: user, now: now) { await client.sendFileDatagrams([ack]) }
        if let fetch = pollFetch(id) { await client.sendFileDatagrams([fetch]) }
        armAckTimer()
    }

    /// The relay's FILE_ACK about a file it holds for this user: FILE_NOT_HELD (asked again
    /// later), or its news that it now holds the file whole (asked at once, the timer re-armed).
    private func relayAnswered(_ ack: SIMPMessage) async {
        guard transfers[ack.fileId]?.fetcher.answered(ack) == true, let fetch = pollFetch(ack.fileId) else { return }
        await client.sendFileDatagrams([fetch])
        ackTimer?.cancel()
        ackTimer = nil
        armAckTimer()
    }

    /// The FILE_FETCH transfer `id` should send now, if any.
    private func pollFetch(_ id: UInt64) -> SIMPMessage? {
        guard let received = transfers[id]?.receiver.received else { return nil }
        return transfers[id]?.fetcher.poll(received: received, now: .now())
    }

    private func sendDueAcks() async {
        var acks: [SIMPMessage] = []
        for id in transfers.keys {
            if let ack = transfers[id]?.receiver.pollAck(from: user, now: .now()) { acks.append(ack) }
            if let fetch = pollFetch(id) { acks.append(fetch) }
        }
        if !acks.isEmpty { await client.sendFileDatagrams(acks) }
        armAckTimer()
    }

    private func armAckTimer() {
        guard ackTimer == nil else { return } // armed already (at every chunk, mostly)
        let deadlines = transfers.values.flatMap { [$0.receiver.nextDeadline, $0.fetcher.nextDeadline] }
        guard let due = deadlines.compactMap({ $0 }).min() else { return }
        ackTimer = Task { [weak self] in
            try? await Task.sleep(nanoseconds: UInt64(max((due - .now()).nanoseconds, 0)))
            guard !Task.isCancelled else { return }
            await self?.ackTimerFired()
        }
    }

    private func ackTimerFired() async {
        ackTimer = nil
        await sendDueAcks()
    }

    /// Saves which chunks are held: the part file is flushed first, so the record never
    /// names a chunk the disk does not have.
    private func save(_ id: UInt64) {
        guard var transfer = transfers[id] else { return }
        try? transfer.handle.synchronize()
        let offer = transfer.receiver.offer
        let state = State(
            fileId: offer.fileId, sender: offer.sender, name: offer.name, size: offer.size, chunkSize: offer.chunkSize, key: offer.key,
            digest: offer.digest, ranges: transfer.receiver.received.ranges.map { [$0.lowerBound, $0.upperBound] })
        if let data = try? JSONEncoder().encode(state) {
            try? DurableFile.replace(partial.appendingPathComponent("\(id).json"), with: data) // the old record or the new one
        }
        transfer.unsaved = 0
        transfers[id] = transfer
    }

    private func finish(_ id: UInt64) async {
        guard let transfer = transfers.removeValue(forKey: id) else { return }
        let offer = transfer.receiver.offer
        try? transfer.handle.synchronize()
        try? transfer.handle.close()
        let part = partPath(id)
        let digest = FileDownloads.digest(of: part)
        guard digest == offer.digest else {
            await client.sendFileDatagrams([transfer.receiver.refusal("the file's SHA-256 does not match its announcement", from: user)])
            removePartial(id)
            return failed("\(offer.name) from \(offer.sender): its SHA-256 does not match the announcement; discarded")
        }
        do {
            let destination = try FileDownloads.moveUnique(part, into: directory, name: FileDownloads.sanitised(offer.name))
            try? FileManager.default.removeItem(at: partial.appendingPathComponent("\(id).json"))
            if let record = try? JSONEncoder().encode(ReceivedFile(offer: offer, path: destination.path)) {
                let name = ReceivedFile.recordName(sender: offer.sender, digest: offer.digest)
                try? DurableFile.replace(received.appendingPathComponent(name + ".json"), with: record)
            }
            completed[id] = transfer.receiver
            // The relay's copy, if it served one, may go once every device of this user has it.
            let release = transfer.fetcher.servedByRelay ? [transfer.fetcher.release()] : []
            await client.sendFileDatagrams([transfer.receiver.done(from: user)] + release)
            saved(
                Saved(
                    name: destination.lastPathComponent, size: offer.size, sha256: Self.hex(digest),
                    path: destination.path, from: offer.sender, room: rooms[offer.fileId] ?? ""))
        } catch {
            failed("cannot save \(offer.name) into \(directory.path): \(error.localizedDescription)")
        }
    }

    private func fail(_ transfer: Transfer, _ reason: String) async {
        let id = transfer.receiver.offer.fileId
        transfers[id] = nil
        try? transfer.handle.close()
        removePartial(id)
        await client.sendFileDatagrams([transfer.receiver.refusal(reason, from: user)])
        failed(reason)
    }

    private func removePartial(_ id: UInt64) {
        try? FileManager.default.removeItem(at: partPath(id))
        try? FileManager.default.removeItem(at: partial.appendingPathComponent("\(id).json"))
    }

    private static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    private func partPath(_ id: UInt64) -> URL { partial.appendingPathComponent("\(id).part") }
}
