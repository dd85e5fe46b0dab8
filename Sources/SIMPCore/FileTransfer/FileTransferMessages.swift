import NIOCore

extension SIMPMessage {
    /// A FILE_CHUNK from `user` to `peer`: chunk `index` of file `fileId` (already sealed with
    /// the file's key), transmission `number`.
    public static func fileChunk(_ sealed: [UInt8], index: UInt64, number: UInt64, fileId: UInt64, from user: String, to peer: String) -> SIMPMessage
    {
        var message = SIMPMessage(kind: .fileChunk, fromUser: user, toUser: peer)
        message.fileId = fileId
        message.chunkIndex = index
        message.fileSeq = number
        message.chunk = sealed
        return message
    }

    /// A FILE_GRANT from `user`: let `peer` fetch file `fileId`, which the relay holds whole from
    /// `user`'s upload to someone else (docs/PROTOCOL.md §5.7).
    public static func fileGrant(_ fileId: UInt64, to peer: String, from user: String) -> SIMPMessage {
        var grant = SIMPMessage(kind: .fileGrant, fromUser: user, toUser: peer)
        grant.fileId = fileId
        return grant
    }

    /// This file announcement with its room (`fileRoom`) kept only when `members`, the room's
    /// members as the relay lists them to this `user` (nil: it would not list them), hold both
    /// `user` and the sender; else the room is dropped and the file is a direct file from its
    /// sender (a sender cannot make a file look posted to a room the two do not share).
    public func withFileRoomChecked(members: [String]?, user: String) -> SIMPMessage {
        guard !fileRoom.isEmpty else { return self }
        var checked = self
        if let members, members.contains(user), members.contains(fromUser) { return checked }
        checked.fileRoom = ""
        return checked
    }

    /// Whether this is a datagram of a file transfer (FILE_CHUNK or FILE_ACK).
    public var isFileTransfer: Bool { kind == .fileChunk || kind == .fileAck }

    /// A FILE_UPLOAD: `chunk` for the relay to hold for `peer`, who is offline (docs/PROTOCOL.md
    /// §5.7), with the file's size and chunk size, which the relay needs.
    public static func fileUpload(_ chunk: SIMPMessage, fileSize: UInt64, chunkSize: Int) -> SIMPMessage {
        var upload = chunk
        upload.kind = .fileUpload
        upload.fileSize = fileSize
        upload.fileChunkSize = UInt32(chunkSize)
        return upload
    }

    /// A FILE_FETCH asking the relay for chunks `ranges` of file `fileId` from `sender`; with
    /// `done`, saying this device has the whole file.
    public static func fileFetch(_ fileId: UInt64, ranges: ChunkRanges = ChunkRanges(), done: Bool = false, from sender: String) -> SIMPMessage {
        var fetch = SIMPMessage(kind: .fileFetch, toUser: sender)
        fetch.fileId = fileId
        fetch.fileRanges = ranges.wireForm
        fetch.fileDone = done
        return fetch
    }

}

extension FileSender {
    /// A FILE_ACK for this transfer arrived: the chunks it names are retired, or a refusal ends
    /// the transfer. Returns false when the acknowledgement is malformed (and ignored).
    @discardableResult
    public mutating func acknowledgement(_ ack: SIMPMessage, now: NIODeadline) -> Bool {
        guard ack.kind == .fileAck, ack.fileId == fileId, let ranges = ChunkRanges(wireForm: ack.fileRanges) else { return false }
        if ack.errorCode == .fileRefused || ack.errorCode == .fileQuotaExceeded {
            let who = ack.errorCode == .fileRefused ? "the receiver refused the file" : "the relay will not hold the file"
            refused(ack.errorText.isEmpty ? who : "\(who): \(ack.errorText)")
            return true
        }
        if ack.fileHeld && ack.fileDone { heldByRelay = true }
        acknowledgement(
            ranges, newestNumber: ack.fileSeq, delay: .microseconds(Int64(ack.holdMicros)), device: ack.device,
            instance: ack.stream, done: ack.fileDone, now: now)
        return true
    }
}
