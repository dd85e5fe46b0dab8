import NIOCore

/// Files the relay holds for a receiver that is offline (docs/PROTOCOL.md §5.7). The sender
/// uploads the file's sealed chunks (FILE_UPLOAD) and the relay acts as the receiver: it keeps
/// each chunk in the store and acknowledges the chunks stored with FILE_ACKs of its own
/// (`fileHeld`), `fileDone` once the store holds the whole file, so the sender may go. The
/// receiver, told of the file end to end by its stored announcement, asks for the chunks
/// (FILE_FETCH) and gets them as FILE_CHUNKs; when it has the file whole it says so
/// (`fileDone`), and the store deletes the file once every device of the receiver has it.
/// A sender may grant a file it uploaded to a further receiver (FILE_GRANT), who then fetches
/// it the same way: forwarding without uploading again. Nothing the relay keeps can be read
/// without the file's key.
extension RelayCore {
    /// The device name in the relay's FILE_ACKs (a sender takes acknowledgements from one device).
    public static let heldFileDevice = "(relay)"
    /// The most chunks one FILE_FETCH is answered with.
    public static let maxChunksPerFetch = 256

    /// A FILE_UPLOAD of `user`'s session `session` (its version, sender and rate already checked).
    mutating func holdUpload(_ payload: ByteBuffer, from user: String, session: UInt64, into output: inout [RelayAction]) {
        guard let upload = try? MessageCodec.decode(payload) else {
            return output.append(.reject(.malformed, detail: "FILE_UPLOAD of \(payload.readableBytes) bytes from \(user)"))
        }
        let chunkSize = UInt64(upload.fileChunkSize)
        // A size near 2^64 would overflow counting its chunks: no file is that large.
        guard upload.fileId != 0, (1...(UInt64.max >> 2)).contains(upload.fileSize), (1...65_536).contains(chunkSize),
            upload.chunkIndex < FileSender.chunkCount(size: upload.fileSize, chunkSize: Int(chunkSize))
        else {
            return output.append(.reject(.missingField, detail: "FILE_UPLOAD from \(user) without a file id, size, chunk size or a chunk in range"))
        }
        let plaintext = min(chunkSize, upload.fileSize - upload.chunkIndex * chunkSize)
        guard UInt64(upload.chunk.count) == plaintext + UInt64(FileChunkCipher.overhead) else {
            return output.append(.reject(.malformed, detail: "FILE_UPLOAD chunk \(upload.chunkIndex) from \(user) has \(upload.chunk.count) bytes"))
        }
        let chunk = HeldChunk(
            owner: user, recipient: upload.toUser, fileId: upload.fileId, index: upload.chunkIndex, number: upload.fileSeq,
            fileSize: upload.fileSize, chunkSize: upload.fileChunkSize, sealed: upload.chunk)
        let limit = configuration.maxHeldFileBytes
        guard limit > 0, upload.fileSize <= limit else {
            let reason =
                limit == 0
                ? "this relay holds no files for receivers who are offline"
                : "this relay holds files of at most \(limit) bytes for receivers who are offline; this one has \(upload.fileSize)"
            output.append(.reject(.limitReached, detail: "FILE_UPLOAD of \(user): \(reason)"))
            if let refusal = sessions.seal(Self.heldFileRefusal(chunk, reason), forSession: session) { output.append(refusal) }
            return
        }
        output.append(.store(.holdFileChunk(chunk)))
    }

    /// The store kept `chunk` (or refused it): the sender's sessions get the relay's FILE_ACK.
    mutating func heldChunkStored(_ chunk: HeldChunk, _ result: HeldChunkResult, now: NIODeadline, into output: inout [RelayAction]) {
        var ack: SIMPMessage
        switch result {
        case .refused(let reason):
            output.append(.reject(.limitReached, detail: "FILE_UPLOAD of \(chunk.owner): \(reason)"))
            ack = Self.heldFileRefusal(chunk, reason)
        case .held(let complete):
            let (stored, newest) = heldUploads.stored(chunk, now: now)
            ack = Self.heldFileAck(chunk, instance: heldUploads.instance)
            ack.fileSeq = newest
            ack.fileRanges = ChunkRanges(stored.reported(limit: 64)).wireForm
            if complete {
                heldUploads.finished(owner: chunk.owner, fileId: chunk.fileId)
                ack.fileRanges = ChunkRanges([0..<chunk.chunkCount]).wireForm
                ack.fileDone = true
            }
            passOn(chunk, now: now, into: &output)
        }
        sessions.sealForEverySession(MessageCodec.encode(ack), to: chunk.owner, into: &output)
    }

    /// A chunk just stored goes on at once to the recipient's receiving sessions, on this relay
    /// and on the others the route cache knows of (`sendToReceiversElsewhere`), as a FILE_CHUNK
    /// from the sender (`fileSeq` 0, as fetched chunks): a user with devices online (here or on
    /// other relays) and others offline gets the file live on those online while the relay
    /// keeps it for the others. Chunks lost on the way, and those stored before a lookup of the
    /// recipient answered, are served by FILE_FETCH.
    private mutating func passOn(_ chunk: HeldChunk, now: NIODeadline, into output: inout [RelayAction]) {
        let message = SIMPMessage.fileChunk(
            chunk.sealed, index: chunk.index, number: 0, fileId: chunk.fileId, from: chunk.owner, to: chunk.recipient)
        let payload = MessageCodec.encode(message)
        if sessions.hasReceiver(chunk.recipient) {
            sessions.sealForEverySession(payload, to: chunk.recipient, receiversOnly: true, into: &output)
        }
        sendToReceiversElsewhere(payload, to: chunk.recipient, now: now, into: &output)
    }

    /// A FILE_FETCH of `user`'s session `session`: the chunks asked for are read from the
    /// store, or (`fileDone`) the device has the file and the store may let it go.
    mutating func fetchHeld(_ payload: ByteBuffer, from user: String, session: UInt64, into output: inout [RelayAction]) {
        guard let fetch = try? MessageCodec.decode(payload), fetch.fileId != 0, let wanted = ChunkRanges(wireForm: fetch.fileRanges) else {
            return output.append(.reject(.malformed, detail: "FILE_FETCH of \(payload.readableBytes) bytes from \(user)"))
        }
        if fetch.fileDone {
            let device = sessions.recipient(ofSession: session)?.device ?? ""
            return output.append(.store(.releaseHeldFile(owner: fetch.toUser, fileId: fetch.fileId, recipient: user, device: device)))
        }
        var indices: [UInt64] = []
        for range in wanted.ranges {
            for index in range {
                guard indices.count < Self.maxChunksPerFetch else { break }
                indices.append(index)
            }
        }
        guard !indices.isEmpty else { return }
        output.append(
            .store(.fetchHeldChunks(HeldFileFetch(owner: fetch.toUser, recipient: user, fileId: fetch.fileId, session: session, indices: indices))))
    }

    /// `device` of `recipient` said for the first time that it has `owner`'s held file whole and
    /// verified: the owner hears it (a FILE_ACK with `fileReceived` on the control channel), so
    /// its "stored" mark turns delivered. Stored in the owner's log, as a stored receipt is,
    /// when no receiving device of the owner is here (or some are on other relays); handed over
    /// at its next connect. Only what the store confirmed (a held file of that recipient, a
    /// device new to it) is told: nobody can plant such news in another user's log.
    mutating func heldFileReceived(owner: String, fileId: UInt64, by recipient: String, device: String, into output: inout [RelayAction]) {
        var news = SIMPMessage(kind: .fileAck, fromUser: recipient, toUser: owner)
        news.fileId = fileId
        news.fileDone = true
        news.fileReceived = true
        news.device = device
        for connection in sessions.connections(of: owner) { output.append(.send(connection, news)) }
        if !sessions.hasReceiver(owner) || sessions.isElsewhere(owner) { output.append(.store(.storeInInbox(user: owner, message: news))) }
    }

    /// The store read the chunks of `fetch` (nil: it holds no such file for the asker): they go
    /// to the asking session as FILE_CHUNKs, or a FILE_ACK FILE_NOT_HELD says there is none.
    mutating func heldChunksFetched(_ fetch: HeldFileFetch, _ chunks: [UInt64: [UInt8]]?, into output: inout [RelayAction]) {
        guard let chunks else {
            var answer = SIMPMessage(kind: .fileAck, fromUser: fetch.owner, toUser: fetch.recipient)
            answer.fileId = fetch.fileId
            answer.fileHeld = true
            answer.device = Self.heldFileDevice
            answer.errorCode = .fileNotHeld
            answer.errorText = "the relay holds no file \(fetch.fileId) from \(fetch.owner) for \(fetch.recipient)"
            if let action = sessions.seal(answer, forSession: fetch.session) { output.append(action) }
            return
        }
        for index in fetch.indices {
            guard let sealed = chunks[index] else { continue } // not uploaded yet: asked for again later
            let chunk = SIMPMessage.fileChunk(sealed, index: index, number: 0, fileId: fetch.fileId, from: fetch.owner, to: fetch.recipient)
            if let action = sessions.seal(chunk, forSession: fetch.session) { output.append(action) }
        }
    }

    /// A FILE_GRANT of `user`'s session `session`: `toUser` may fetch the file `fileId` that
    /// `user` uploaded (for someone else) and the store holds whole. Only the uploader can
    /// grant: the file is looked up under the granting user's name, so a grant of another
    /// user's file id finds nothing.
    mutating func grantHeld(_ payload: ByteBuffer, from user: String, session: UInt64, now: NIODeadline, into output: inout [RelayAction]) {
        guard let message = try? MessageCodec.decode(payload), message.fileId != 0, message.toUser.utf8.count <= RelayDelivery.maxUserLength
        else {
            return output.append(.reject(.malformed, detail: "FILE_GRANT of \(payload.readableBytes) bytes from \(user)"))
        }
        let grant = HeldFileGrant(owner: user, recipient: message.toUser, fileId: message.fileId, session: session)
        guard configuration.maxHeldFileBytes > 0 else {
            return heldFileGranted(grant, .refused("this relay holds no files for receivers who are offline"), now: now, into: &output)
        }
        output.append(.store(.grantHeldFile(grant)))
    }

    /// The store answered `grant`: the granting session hears the relay's FILE_ACK for the new
    /// receiver (the whole file, `fileDone`), or why not (FILE_NOT_HELD, FILE_QUOTA_EXCEEDED);
    /// granted, the new receiver's devices online are told too (`tellGranted`).
    mutating func heldFileGranted(_ grant: HeldFileGrant, _ result: HeldFileGrantResult, now: NIODeadline, into output: inout [RelayAction]) {
        var ack = SIMPMessage(kind: .fileAck, fromUser: grant.recipient, toUser: grant.owner)
        ack.fileId = grant.fileId
        ack.fileHeld = true
        ack.device = Self.heldFileDevice
        ack.stream = heldUploads.instance
        switch result {
        case .granted(let chunks):
            ack.fileRanges = ChunkRanges([0..<chunks]).wireForm
            ack.fileDone = true
            tellGranted(grant, chunks: chunks, now: now, into: &output)
        case .notHeld:
            output.append(.reject(.fileNotHeld, detail: "FILE_GRANT of \(grant.owner)'s file \(grant.fileId) to \(grant.recipient)"))
            ack.errorCode = .fileNotHeld
            ack.errorText = "the relay holds no whole file \(grant.fileId) uploaded by \(grant.owner)"
        case .refused(let reason):
            output.append(.reject(.limitReached, detail: "FILE_GRANT of \(grant.owner): \(reason)"))
            ack.errorCode = .fileQuotaExceeded
            ack.errorText = reason
        }
        if let action = sessions.seal(ack, forSession: grant.session) { output.append(action) }
    }

    /// The receiver of a grant hears that the relay now holds the file whole for it: a FILE_ACK
    /// from the file's sender (`fileHeld`, `fileDone`, the whole file's `fileRanges`, `device`
    /// `(relay)`) to its receiving sessions here and on the other relays where it has some.
    /// A device already told of the file, whose FILE_FETCH was answered FILE_NOT_HELD while the
    /// sender was still uploading for another receiver, fetches at once instead of after its
    /// wait (up to 30 s). It says nothing the relay did not know: who sent which file id to whom.
    private mutating func tellGranted(_ grant: HeldFileGrant, chunks: UInt64, now: NIODeadline, into output: inout [RelayAction]) {
        var notice = SIMPMessage(kind: .fileAck, fromUser: grant.owner, toUser: grant.recipient)
        notice.fileId = grant.fileId
        notice.fileHeld = true
        notice.fileDone = true
        notice.fileRanges = ChunkRanges([0..<chunks]).wireForm
        notice.device = Self.heldFileDevice
        sendFileDatagram(MessageCodec.encode(notice), to: grant.recipient, receiversOnly: true, now: now, into: &output)
    }

    /// The relay's FILE_ACK to the sender of `chunk`.
    private static func heldFileAck(_ chunk: HeldChunk, instance: UInt64) -> SIMPMessage {
        var ack = SIMPMessage(kind: .fileAck, fromUser: chunk.recipient, toUser: chunk.owner)
        ack.fileId = chunk.fileId
        ack.fileHeld = true
        ack.device = heldFileDevice
        ack.stream = instance
        return ack
    }

    /// The relay's FILE_ACK refusing to hold `chunk`'s file.
    private static func heldFileRefusal(_ chunk: HeldChunk, _ reason: String) -> SIMPMessage {
        var ack = heldFileAck(chunk, instance: 0)
        ack.errorCode = .fileQuotaExceeded
        ack.errorText = reason
        return ack
    }
}
