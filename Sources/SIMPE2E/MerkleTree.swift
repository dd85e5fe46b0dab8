import Crypto

/// The key directory's append-only log as a Merkle tree (docs/E2E.md §18), hashed as RFC 9162
/// §2.1 does: SHA-256, a leaf hash `SHA-256(0x00 ‖ leaf data)` and a node hash
/// `SHA-256(0x01 ‖ left ‖ right)`, the tree over n leaves split at the largest power of two
/// below n. The relay builds proofs from the leaf hashes it keeps; a client checks them with
/// the static functions alone (it never needs the leaves).
public struct MerkleTree: Sendable, Equatable {
    /// Every leaf's hash, in the order they were appended.
    public private(set) var leafHashes: [[UInt8]]

    /// A tree over `leafHashes` (32 bytes each).
    public init(leafHashes: [[UInt8]] = []) {
        self.leafHashes = leafHashes
    }

    /// The number of leaves.
    public var size: Int { leafHashes.count }

    /// The tree's root hash (SHA-256 of nothing for an empty tree).
    public var root: [UInt8] { Self.root(of: leafHashes[...]) }

    /// Appends a leaf whose data is `data`; returns its index.
    @discardableResult
    public mutating func append(leafData data: [UInt8]) -> Int {
        leafHashes.append(Self.leafHash(data))
        return leafHashes.count - 1
    }

    /// The root of the tree's first `size` leaves.
    public func root(atSize size: Int) -> [UInt8] {
        precondition(size >= 0 && size <= leafHashes.count, "root at size \(size) of a tree of \(leafHashes.count)")
        return Self.root(of: leafHashes[..<size])
    }

    /// The audit path of leaf `index` in the tree's first `size` leaves, from the leaf upwards
    /// (RFC 9162 §2.1.3.1). Nil when `index` is not below `size` or `size` is past the tree.
    public func inclusionProof(index: Int, size: Int) -> [[UInt8]]? {
        guard index >= 0, index < size, size <= leafHashes.count else { return nil }
        return Self.path(index, leafHashes[..<size])
    }

    /// The proof that the tree's first `oldSize` leaves are a prefix of its first `newSize`
    /// (RFC 9162 §2.1.4.1). Nil when the sizes are not 0 ≤ old ≤ new ≤ size.
    public func consistencyProof(oldSize: Int, newSize: Int) -> [[UInt8]]? {
        guard oldSize >= 0, oldSize <= newSize, newSize <= leafHashes.count else { return nil }
        guard oldSize > 0, oldSize < newSize else { return [] }
        return Self.subproof(oldSize, leafHashes[..<newSize], complete: true)
    }

    // MARK: Hashing

    /// `SHA-256(0x00 ‖ data)`.
    public static func leafHash(_ data: [UInt8]) -> [UInt8] {
        var hash = SHA256()
        hash.update(data: [0])
        hash.update(data: data)
        return Array(hash.finalize())
    }

    /// `SHA-256(0x01 ‖ left ‖ right)`.
    public static func nodeHash(_ left: [UInt8], _ right: [UInt8]) -> [UInt8] {
        var hash = SHA256()
        hash.update(data: [1])
        hash.update(data: left)
        hash.update(data: right)
        return Array(hash.finalize())
    }

    static func root(of leaves: ArraySlice<[UInt8]>) -> [UInt8] {
        switch leaves.count {
        case 0: return Array(SHA256.hash(data: [UInt8]()))
        case 1: return leaves[leaves.startIndex]
        default:
            let split = leaves.startIndex + largestPowerOfTwo(below: leaves.count)
            return nodeHash(root(of: leaves[..<split]), root(of: leaves[split...]))
        }
    }

    /// The largest power of two strictly below `count` (count ≥ 2).
    static func largestPowerOfTwo(below count: Int) -> Int {
        var power = 1
        while power * 2 < count { power *= 2 }
        return power
    }

    private static func path(_ index: Int, _ leaves: ArraySlice<[UInt8]>) -> [[UInt8]] {
        guard leaves.count > 1 else { return [] }
        let half = largestPowerOfTwo(below: leaves.count)
        let split = leaves.startIndex + half
        if index < half {
            return path(index, leaves[..<split]) + [root(of: leaves[split...])]
        }
        return path(index - half, leaves[split...]) + [root(of: leaves[..<split])]
    }

    private static func subproof(_ old: Int, _ leaves: ArraySlice<[UInt8]>, complete: Bool) -> [[UInt8]] {
        if old == leaves.count { return complete ? [] : [root(of: leaves)] }
        let half = largestPowerOfTwo(below: leaves.count)
        let split = leaves.startIndex + half
        if old <= half {
            return subproof(old, leaves[..<split], complete: complete) + [root(of: leaves[split...])]
        }
        return subproof(old - half, leaves[split...], complete: false) + [root(of: leaves[..<split])]
    }

    // MARK: Verifying (what a client runs)

    /// Whether `proof` shows the leaf hashed `leafHash` at `index` in the tree of `size` leaves
    /// whose root is `root` (RFC 9162 §2.1.3.2).
    public static func verifyInclusion(leafHash: [UInt8], index: Int, size: Int, proof: [[UInt8]], root: [UInt8]) -> Bool {
        guard index >= 0, index < size, proof.allSatisfy({ $0.count == 32 }) else { return false }
        var fn = index
        var sn = size - 1
        var hash = leafHash
        for sibling in proof {
            guard sn != 0 else { return false }
            if fn & 1 == 1 || fn == sn {
                hash = nodeHash(sibling, hash)
                while fn & 1 == 0 && fn != 0 {
                    fn >>= 1
                    sn >>= 1
                }
            } else {
                hash = nodeHash(hash, sibling)
            }
            fn >>= 1
            sn >>= 1
        }
        return sn == 0 && hash == root
    }

    /// Whether `proof` shows the tree of `oldSize` leaves with root `oldRoot` is a prefix of the
    /// tree of `newSize` leaves with root `newRoot` (RFC 9162 §2.1.4.2). Equal sizes need equal
    /// roots and an empty proof; an empty old tree is a prefix of every tree.
    public static func verifyConsistency(
        oldSize: Int, oldRoot: [UInt8], newSize: Int, newRoot: [UInt8], proof: [[UInt8]]
    ) -> Bool {
        guard oldSize >= 0, oldSize <= newSize, proof.allSatisfy({ $0.count == 32 }) else { return false }
        if oldSize == newSize { return proof.isEmpty && oldRoot == newRoot }
        if oldSize == 0 { return proof.isEmpty }
        guard !proof.isEmpty else { return false }
        var path = proof
        if oldSize & (oldSize - 1) == 0 { path.insert(oldRoot, at: 0) }
        var fn = oldSize - 1
        var sn = newSize - 1
        while fn & 1 == 1 {
            fn >>= 1
            sn >>= 1
        }
        var oldHash = path[0]
        var newHash = path[0]
        for sibling in path.dropFirst() {
            guard sn != 0 else { return false }
            if fn & 1 == 1 || fn == sn {
                oldHash = nodeHash(sibling, oldHash)
                newHash = nodeHash(sibling, newHash)
                while fn & 1 == 0 && fn != 0 {
                    fn >>= 1
                    sn >>= 1
                }
            } else {
                newHash = nodeHash(newHash, sibling)
            }
            fn >>= 1
            sn >>= 1
        }
        return sn == 0 && oldHash == oldRoot && newHash == newRoot
    }
}
