/// A file this device received whole and verified, as its receiver remembers it after the
/// transfer (docs/PROTOCOL.md §5.6): the same file announced again by the same sender — its
/// sender was started again before it heard `fileDone`, or sent the file once more — is
/// answered `fileDone` at once instead of being received a second time.
///
/// Only the same sender's announcement matches: a device does not confirm to anyone else that
/// it holds a file of a given digest.
public struct ReceivedFile: Codable, Equatable, Sendable {
    public var fileId: UInt64
    /// Who sent it.
    public var sender: String
    public var size: UInt64
    /// The plaintext's SHA-256.
    public var digest: [UInt8]
    /// Where it was saved.
    public var path: String

    /// The record of `offer`, received whole and saved at `path`.
    public init(offer: FileReceiver.Offer, path: String) {
        self.fileId = offer.fileId
        self.sender = offer.sender
        self.size = offer.size
        self.digest = offer.digest
        self.path = path
    }

    /// Whether `offer` announces this file again: the same sender, size and SHA-256. The file
    /// id may differ (a sender that heard `fileDone` draws a new one for its next send).
    public func isAnnounced(by offer: FileReceiver.Offer) -> Bool {
        offer.sender == sender && offer.size == size && offer.digest == digest
    }

    /// The name the record of a file from `sender` with SHA-256 `digest` is kept under: hex,
    /// the same for every announcement of that file by that sender, and neither of them.
    public static func recordName(sender: String, digest: [UInt8]) -> String {
        FileDigest.of(Array("\(sender)\u{0}".utf8) + digest).prefix(16).map { hexDigit($0 >> 4) + hexDigit($0 & 15) }.joined()
    }

    private static func hexDigit(_ value: UInt8) -> String { String(value, radix: 16) }
}

extension FileReceiver {
    /// A receiver of `offer` that holds every chunk already: for a file this device received
    /// before (`ReceivedFile`). Its `done` covers the whole file, and a chunk that arrives
    /// anyway is a duplicate, acknowledged at once and never written.
    public static func holdingEverything(offer: Offer, device: String, instance: UInt64) -> FileReceiver {
        let chunks = offer.chunkCount
        return FileReceiver(offer: offer, device: device, instance: instance, received: ChunkRanges(chunks > 0 ? [0..<chunks] : []))
    }
}
