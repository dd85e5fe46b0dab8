/// The key directory log's fields of a KEYS_FETCH (docs/PROTOCOL.md §4.8, docs/E2E.md §18):
/// the client says the largest head it verified; the relay's answer proves the fetched device
/// list is in its signed log and that the log extends what the client saw.
public struct DirectoryProof: Sendable, Equatable {
    /// Answer: the relay's signed tree head (113 bytes, `SIMPE2E.SignedTreeHead`).
    public var treeHead: [UInt8] = []
    /// Answer: the relay's Ed25519 tree key (32 bytes).
    public var treeKey: [UInt8] = []
    /// Answer: the device list's leaf index in the log.
    public var logIndex: UInt64 = 0
    /// Answer: the audit path of that leaf, 32 bytes a hash, from the leaf upwards.
    public var inclusionProof: [UInt8] = []
    /// Request: the size of the largest head the client verified (0: none).
    public var knownTreeSize: UInt64 = 0
    /// Answer: the consistency proof from `knownTreeSize` to the head's size, 32 bytes a hash.
    public var consistencyProof: [UInt8] = []
    /// End-to-end plaintext only: the sender's last verified head (`DirectoryCheckpoint`, 40 bytes).
    public var directoryCheckpoint: [UInt8] = []
    /// Request: the size of a head a peer gossiped, to prove against (0: none).
    public var peerTreeSize: UInt64 = 0
    /// Answer: the consistency proof from `peerTreeSize` to the head's size, 32 bytes a hash.
    public var peerConsistencyProof: [UInt8] = []

    public init(
        treeHead: [UInt8] = [], treeKey: [UInt8] = [], logIndex: UInt64 = 0, inclusionProof: [UInt8] = [], knownTreeSize: UInt64 = 0,
        consistencyProof: [UInt8] = []
    ) {
        self.treeHead = treeHead
        self.treeKey = treeKey
        self.logIndex = logIndex
        self.inclusionProof = inclusionProof
        self.knownTreeSize = knownTreeSize
        self.consistencyProof = consistencyProof
    }

    /// The bytes the encoder copies.
    var byteCount: Int {
        treeHead.count + treeKey.count + inclusionProof.count + consistencyProof.count + directoryCheckpoint.count + peerConsistencyProof.count
    }

    /// Splits a proof field into its 32-byte hashes (nil when its length is not a multiple of 32).
    public static func hashes(_ field: [UInt8]) -> [[UInt8]]? {
        guard field.count % 32 == 0 else { return nil }
        return stride(from: 0, to: field.count, by: 32).map { Array(field[$0..<$0 + 32]) }
    }

    /// Joins hashes into a proof field.
    public static func field(_ hashes: [[UInt8]]) -> [UInt8] { hashes.flatMap { $0 } }
}
