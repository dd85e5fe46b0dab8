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

    /// Whether this is a datagram of a file transfer (FILE_CHUNK or FILE_ACK).
    public var isFileTransfer: Bool { kind == .fileChunk || kind == .fileAck }

}

extension FileSender {
    /// A FILE_ACK for this transfer arrived: the chunks it names are retired, or a refusal ends
    /// the transfer. Returns false when the acknowledgement is malformed (and ignored).
    @discardableResult
    public mutating func acknowledgement(_ ack: SIMPMessage, now: NIODeadline) -> Bool {
        guard ack.kind == .fileAck, ack.fileId == fileId, let ranges = ChunkRanges(wireForm: ack.fileRanges) else { return false }
        if ack.errorCode == .fileRefused {
            refused(ack.errorText.isEmpty ? "the receiver refused the file" : ack.errorText)
            return true
        }
        acknowledgement(
            ranges, newestNumber: ack.fileSeq, delay: .microseconds(Int64(ack.holdMicros)), device: ack.device,
            instance: ack.stream, done: ack.fileDone, now: now)
        return true
    }
}
