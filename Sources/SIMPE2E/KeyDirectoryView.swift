/// What a client has seen of its relay's key directory log and the checks it runs on what the
/// relay hands it (docs/E2E.md §18.4–18.5): the largest tree head it verified, under the relay's
/// tree key. A fetched device list is trusted only when its inclusion proof verifies against a
/// signed head that extends the last one; a checkpoint gossiped by a peer inside an end-to-end
/// message must lie on the same log. No I/O: the client stores `encoded` and asks the relay for
/// the proofs this type names.
public struct KeyDirectoryView: Equatable, Sendable {
    /// Why the relay's answer shows a directory this client cannot accept.
    public enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
        /// The tree head's signature does not verify or it does not decode.
        case badTreeHead(String)
        /// The head is signed by another key than the one this client saw before.
        case relayKeyChanged
        /// The inclusion proof does not show the entry in the signed head.
        case badInclusionProof
        /// The head is smaller than one this client verified before (the log cannot shrink).
        case rolledBack(from: UInt64, to: UInt64)
        /// Two heads of one size with different roots, or a consistency proof that fails or is
        /// missing: the relay shows different logs.
        case forked(DirectoryCheckpoint, DirectoryCheckpoint)

        public var description: String {
            switch self {
            case .badTreeHead(let why): return "the relay's key directory head does not verify (\(why))"
            case .relayKeyChanged: return "the relay signs its key directory with another key than before"
            case .badInclusionProof: return "the relay's proof does not show these keys in its key directory"
            case .rolledBack(let from, let to): return "the relay's key directory went back from \(from) to \(to) entries"
            case .forked(let one, let other):
                return "the relay's key directory at \(one.size) entries does not extend to the one at \(other.size) entries"
            }
        }
    }

    /// What a peer's gossiped checkpoint means.
    public enum GossipCheck: Equatable, Sendable {
        /// The same head.
        case agrees
        /// This client verified no head yet: fetch one, asking the relay to prove the peer's
        /// checkpoint against it (then `checkGossipProof`).
        case noHeadYet
        /// The same size with another root: the relay shows different directories.
        case forked
        /// Different sizes: ask the relay for a consistency proof from `older` to `newer` and
        /// judge it with `checkGossipProof`.
        case needsProof(older: DirectoryCheckpoint, newer: DirectoryCheckpoint)
    }

    /// The relay's tree key this client pinned (nil before its first verified head).
    public private(set) var relayKey: [UInt8]?
    /// The largest head this client verified.
    public private(set) var latest: SignedTreeHead?

    /// A view that has seen nothing.
    public init() {}

    /// The checkpoint to gossip in end-to-end messages (nil before the first verified head).
    public var checkpoint: DirectoryCheckpoint? { latest?.checkpoint }

    /// What an answer came to when it raised no alarm.
    public enum Verdict: Equatable, Sendable {
        /// The answer is proved: its entry may be taken, and the view holds its head (or a
        /// larger one it already had).
        case proved
        /// The answer was made for a view this client has left since it asked (another answer
        /// moved the view meanwhile): it proves nothing either way. Take nothing from it and ask
        /// again with the view's current size.
        case stale
    }

    /// Checks a key fetch answer: `leafData` (the entry the relay hands out, such as a signed
    /// device list) at `index` with inclusion `proof` under `head` (signed by `relayKey`), and
    /// `consistency`, the relay's proof from `askedAt` (the size this client said it had when it
    /// asked, `knownTreeSize`) to `head`. On `.proved` the view moves to `head`; on `.stale` or a
    /// problem it is unchanged (docs/E2E.md §18.4 says which answers are which).
    public mutating func checkEntry(
        leafData: [UInt8], index: UInt64, proof: [[UInt8]], head encodedHead: [UInt8], relayKey: [UInt8],
        consistency: [[UInt8]], askedAt: UInt64
    ) throws(Problem) -> Verdict {
        guard let head = try acceptableHead(encodedHead, relayKey: relayKey, consistency: consistency, askedAt: askedAt) else { return .stale }
        guard index < head.size,
            MerkleTree.verifyInclusion(
                leafHash: MerkleTree.leafHash(leafData), index: Int(index), size: Int(head.size), proof: proof, root: head.root)
        else { throw .badInclusionProof }
        adopt(head, relayKey: relayKey)
        return .proved
    }

    /// Checks a newer head without an entry (the answer to a consistency request asked at
    /// `askedAt`), as `checkEntry` does.
    public mutating func checkHead(_ encodedHead: [UInt8], relayKey: [UInt8], consistency: [[UInt8]], askedAt: UInt64) throws(Problem) -> Verdict {
        guard let head = try acceptableHead(encodedHead, relayKey: relayKey, consistency: consistency, askedAt: askedAt) else { return .stale }
        adopt(head, relayKey: relayKey)
        return .proved
    }

    /// Compares a checkpoint a peer gossiped with this client's latest head.
    public func compare(peer: DirectoryCheckpoint) -> GossipCheck {
        guard let mine = latest?.checkpoint else { return .noHeadYet }
        if peer.size == mine.size { return peer.root == mine.root ? .agrees : .forked }
        return peer.size < mine.size ? .needsProof(older: peer, newer: mine) : .needsProof(older: mine, newer: peer)
    }

    /// Whether the relay's consistency `proof` shows `older` a prefix of `newer` (false: the
    /// relay shows the peer and this client different logs, or refused to prove otherwise).
    public static func checkGossipProof(older: DirectoryCheckpoint, newer: DirectoryCheckpoint, proof: [[UInt8]]) -> Bool {
        guard older.size <= newer.size, newer.size <= UInt64(Int.max) else { return false }
        return MerkleTree.verifyConsistency(
            oldSize: Int(older.size), oldRoot: older.root, newSize: Int(newer.size), newRoot: newer.root, proof: proof)
    }

    /// The answer's head when it may be adopted, nil when the answer is stale (asked from a
    /// size the view has left since). Only an answer that contradicts what this client held
    /// when it asked is an alarm: a head of the view's size is judged by its root alone, a
    /// smaller one only when it is smaller than `askedAt`, and a larger one's consistency proof
    /// only when it starts at the view's size.
    private func acceptableHead(_ encoded: [UInt8], relayKey: [UInt8], consistency: [[UInt8]], askedAt: UInt64) throws(Problem)
        -> SignedTreeHead?
    {
        if let pinned = self.relayKey, pinned != relayKey { throw .relayKeyChanged }
        let head: SignedTreeHead
        do { head = try SignedTreeHead(encoded: encoded, verifyingWith: relayKey) } catch {
            throw .badTreeHead("\(error)")
        }
        guard head.size <= UInt64(Int.max) else { throw .badTreeHead("size \(head.size)") }
        guard let mine = latest else { return head }
        if head.size == mine.size {
            guard head.root == mine.root else { throw .forked(mine.checkpoint, head.checkpoint) }
            return head
        }
        if head.size < mine.size {
            // Below what this client said it had: the log went back. Between that and the view:
            // made before a larger head was adopted.
            guard head.size >= askedAt else { throw .rolledBack(from: mine.size, to: head.size) }
            return nil
        }
        guard askedAt == mine.size else { return nil } // its proof starts at a head this client has left
        guard Self.checkGossipProof(older: mine.checkpoint, newer: head.checkpoint, proof: consistency) else {
            throw .forked(mine.checkpoint, head.checkpoint)
        }
        return head
    }

    private mutating func adopt(_ head: SignedTreeHead, relayKey: [UInt8]) {
        self.relayKey = relayKey
        if head.size > latest?.size ?? 0 || latest == nil { latest = head }
    }

    // MARK: Stored form

    /// `0x01 ‖ relay key (32) ‖ head (113)`, or `0x00` for a view that saw nothing.
    public var encoded: [UInt8] {
        guard let relayKey, let latest else { return [0] }
        return [1] + relayKey + latest.encoded
    }

    /// Restores a stored view (the head's signature is checked again).
    /// - Throws: `E2EError` when the bytes are not a stored view.
    public init(encoded: [UInt8]) throws {
        guard encoded != [0] else { return }
        var reader = ByteReader(encoded, reading: "key directory view")
        try reader.expectVersion(1)
        let key = try reader.key()
        let head = try SignedTreeHead(encoded: try reader.raw(SignedTreeHead.encodedSize), verifyingWith: key)
        try reader.expectEnd()
        relayKey = key
        latest = head
    }
}
