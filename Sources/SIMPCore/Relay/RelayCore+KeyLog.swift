import SIMPE2E

/// The key directory log (docs/E2E.md §18, PROTOCOL.md §4.8 "The key directory log"): every
/// device list the relay keeps is a leaf of an append-only Merkle tree in the store; a KEYS_FETCH
/// answer proves the list it hands out is in the log the relay signed, and that this log extends
/// the one the asker saw before. The relay decides what to prove; the store keeps the leaves.
extension RelayCore {
    /// The `DirectoryProof` of a fetch answer carrying `deviceList`, or an empty one when there is
    /// no list, no log, or the log does not hold the list (a store written before the log: the
    /// client then trusts the list as before and says so).
    static func directoryProof(for deviceList: [UInt8], in log: KeyLogSnapshot?, knownTreeSize: UInt64, peerTreeSize: UInt64 = 0) -> DirectoryProof {
        guard !deviceList.isEmpty, let log, let index = log.listIndex, index >= 0, index < log.leafHashes.count,
            log.leafHashes[index] == MerkleTree.leafHash(deviceList), let key = try? TreeHeadSigningKey(secretBytes: log.treeKeySecret.bytes)
        else { return DirectoryProof() }
        let tree = MerkleTree(leafHashes: log.leafHashes)
        guard let head = try? SignedTreeHead.signed(size: UInt64(tree.size), root: tree.root, timestampMillis: log.timestampMillis, by: key),
            let inclusion = tree.inclusionProof(index: index, size: tree.size)
        else { return DirectoryProof() }
        // A client that claims a size past the log gets no consistency proof, and refuses the head.
        func consistency(from size: UInt64) -> [UInt8] {
            size <= UInt64(tree.size) ? DirectoryProof.field(tree.consistencyProof(oldSize: Int(size), newSize: tree.size) ?? []) : []
        }
        var proof = DirectoryProof(
            treeHead: head.encoded, treeKey: key.publicKey, logIndex: UInt64(index), inclusionProof: DirectoryProof.field(inclusion),
            consistencyProof: consistency(from: knownTreeSize))
        proof.peerConsistencyProof = peerTreeSize == 0 ? [] : consistency(from: peerTreeSize)
        return proof
    }
}

/// The key directory log as the store hands it to a fetch: every leaf hash in order, where the
/// fetched user's device list is, and the relay's tree key (shared by the relays of one store).
public struct KeyLogSnapshot: Sendable, Equatable {
    /// Every leaf's hash, oldest first.
    public var leafHashes: [[UInt8]]
    /// The index of the fetched user's device list (nil: not in the log).
    public var listIndex: Int?
    /// The tree key's persistent form (`TreeHeadSigningKey.secretBytes`).
    public var treeKeySecret: TreeKeySecret
    /// The wall clock when the store read the log, ms since 1970: the head's time.
    public var timestampMillis: UInt64

    public init(leafHashes: [[UInt8]], listIndex: Int?, treeKeySecret: TreeKeySecret, timestampMillis: UInt64) {
        self.leafHashes = leafHashes
        self.listIndex = listIndex
        self.treeKeySecret = treeKeySecret
        self.timestampMillis = timestampMillis
    }

    /// The leaf hash a published device list adds to the log.
    public static func leafHash(of deviceList: [UInt8]) -> [UInt8] { MerkleTree.leafHash(deviceList) }

    /// A new tree key's persistent form, from `random` (the store makes one on first use).
    public static func newTreeKeySecret(using random: inout some RandomNumberGenerator) -> TreeKeySecret {
        TreeHeadSigningKey(using: &random).secretBytes
    }
}

/// The persistent form of the relay's tree key (redacted when printed).
public typealias TreeKeySecret = SecretBytes
