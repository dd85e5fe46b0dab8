import NIOCore

/// What of a content message travels end to end (docs/E2E.md §13): everything a person wrote
/// or linked. The plaintext is the protobuf encoding of a `Message` holding only `content`,
/// `imageURL` and `imageScale`, so a field added later travels the same way: a file's
/// announcement adds its id, key, size, chunk size and digest, and the room it was sent to (docs/E2E.md §17).
extension SIMPMessage {
    /// The plaintext to encrypt: this message's content fields alone.
    public var endToEndPlaintext: [UInt8] {
        var inner = SIMPMessage(content: content)
        inner.version = 0
        inner.imageURL = imageURL
        inner.imageScale = imageScale
        inner.fileId = fileId
        inner.fileKey = fileKey
        inner.fileSize = fileSize
        inner.fileChunkSize = fileChunkSize
        inner.fileDigest = fileDigest
        inner.fileRoom = fileRoom
        inner.directoryProof.directoryCheckpoint = directoryProof.directoryCheckpoint
        return Array(MessageCodec.encode(inner).readableBytesView)
    }

    /// This message as it goes out: the content fields only inside `envelope`.
    public func sealedEndToEnd(_ envelope: [UInt8]) -> SIMPMessage {
        var sealed = self
        sealed.content = ""
        sealed.imageURL = ""
        sealed.imageScale = 0
        sealed.fileId = 0
        sealed.fileKey = []
        sealed.fileSize = 0
        sealed.fileChunkSize = 0
        sealed.fileDigest = []
        sealed.fileRoom = ""
        sealed.directoryProof.directoryCheckpoint = []
        sealed.e2ePayload = envelope
        return sealed
    }

    /// This message with its content fields taken from decrypted `plaintext` (`e2ePayload`
    /// stays, saying the message came end to end encrypted).
    public func openedEndToEnd(_ plaintext: [UInt8]) throws -> SIMPMessage {
        let inner = try MessageCodec.decode(ByteBuffer(bytes: plaintext))
        var opened = self
        opened.content = inner.content
        opened.imageURL = inner.imageURL
        opened.imageScale = inner.imageScale
        opened.fileId = inner.fileId
        opened.fileKey = inner.fileKey
        opened.fileSize = inner.fileSize
        opened.fileChunkSize = inner.fileChunkSize
        opened.fileDigest = inner.fileDigest
        opened.fileRoom = inner.fileRoom
        opened.directoryProof.directoryCheckpoint = inner.directoryProof.directoryCheckpoint
        return opened
    }

    /// Whether this content message came (or goes) end to end encrypted.
    public var isEndToEnd: Bool { !e2ePayload.isEmpty }
}
