import XCTest

@testable import SIMPE2E

/// A client's checks of its relay's key directory (docs/E2E.md §18.4–18.5): an entry is trusted
/// only with an inclusion proof under a signed head that extends the last one, and a peer's
/// gossiped checkpoint exposes a relay that shows two users different logs.
final class KeyDirectoryViewTests: XCTestCase {
    private let relayKey: TreeHeadSigningKey = {
        var random = SeededRandom(seed: 51)
        return TreeHeadSigningKey(using: &random)
    }()

    /// A relay's log: entries "entry 0" … and heads signed over it.
    private struct Log {
        var tree = MerkleTree()
        var entries: [[UInt8]] = []
        mutating func append(_ text: String) {
            entries.append(Array(text.utf8))
            tree.append(leafData: Array(text.utf8))
        }
    }

    private func log(_ count: Int) -> Log {
        var log = Log()
        for index in 0..<count { log.append("entry \(index)") }
        return log
    }

    private func head(_ log: Log, key: TreeHeadSigningKey? = nil) throws -> [UInt8] {
        try SignedTreeHead.signed(size: UInt64(log.tree.size), root: log.tree.root, timestampMillis: 1_000, by: key ?? relayKey).encoded
    }

    /// A key fetch answer for entry `index` of `log`, made for a client that said it knew
    /// `known` entries (the consistency proof starts there).
    private struct Answer {
        var entry: [UInt8]
        var index: Int
        var inclusion: [[UInt8]]
        var head: [UInt8]
        var consistency: [[UInt8]]
        var known: UInt64
    }

    private func answer(_ index: Int, of log: Log, known: Int) throws -> Answer {
        Answer(
            entry: log.entries[index], index: index, inclusion: log.tree.inclusionProof(index: index, size: log.tree.size)!, head: try head(log),
            consistency: log.tree.consistencyProof(oldSize: min(known, log.tree.size), newSize: log.tree.size) ?? [], known: UInt64(known))
    }

    /// Has `view` check `answer`, asked when the view said it knew `answer.known` entries.
    @discardableResult
    private func take(_ answer: Answer, into view: inout KeyDirectoryView) throws(KeyDirectoryView.Problem) -> KeyDirectoryView.Verdict {
        try view.checkEntry(
            leafData: answer.entry, index: UInt64(answer.index), proof: answer.inclusion, head: answer.head, relayKey: relayKey.publicKey,
            consistency: answer.consistency, askedAt: answer.known)
    }

    /// Has `view` check entry `index` of `log`, with a consistency proof from the view's head.
    @discardableResult
    private func fetch(_ index: Int, of log: Log, into view: inout KeyDirectoryView, proof: [[UInt8]]? = nil) throws(KeyDirectoryView.Problem)
        -> KeyDirectoryView.Verdict
    {
        var answer = try! answer(index, of: log, known: Int(view.latest?.size ?? 0))
        if let proof { answer.inclusion = proof }
        return try take(answer, into: &view)
    }

    func testAnEntryInTheSignedLogIsTrustedAndTheViewFollowsTheGrowingLog() throws {
        var view = KeyDirectoryView()
        XCTAssertNil(view.checkpoint)
        var relay = log(3)
        try fetch(1, of: relay, into: &view)
        XCTAssertEqual(view.checkpoint, DirectoryCheckpoint(size: 3, root: relay.tree.root))
        relay.append("bob's new list")
        relay.append("carol's list")
        try fetch(4, of: relay, into: &view)
        XCTAssertEqual(view.latest?.size, 5)
        XCTAssertEqual(try KeyDirectoryView(encoded: view.encoded), view, "stored and restored")
        XCTAssertEqual(try KeyDirectoryView(encoded: KeyDirectoryView().encoded), KeyDirectoryView())
    }

    func testAWrongProofAnotherKeyOrAShrunkLogIsRefusedAndLeavesTheViewAsItWas() throws {
        var view = KeyDirectoryView()
        let relay = log(6)
        XCTAssertThrowsError(try fetch(2, of: relay, into: &view, proof: relay.tree.inclusionProof(index: 3, size: 6)!)) {
            XCTAssertEqual($0 as? KeyDirectoryView.Problem, .badInclusionProof)
        }
        XCTAssertNil(view.latest, "nothing adopted from a refused answer")
        try fetch(2, of: relay, into: &view)
        let before = view
        var random = SeededRandom(seed: 52)
        let otherKey = TreeHeadSigningKey(using: &random)
        XCTAssertThrowsError(
            try view.checkEntry(
                leafData: relay.entries[0], index: 0, proof: relay.tree.inclusionProof(index: 0, size: 6)!, head: try head(relay, key: otherKey),
                relayKey: otherKey.publicKey, consistency: [], askedAt: 6)
        ) { XCTAssertEqual($0 as? KeyDirectoryView.Problem, .relayKeyChanged) }
        XCTAssertThrowsError(try fetch(0, of: log(4), into: &view)) {
            XCTAssertEqual($0 as? KeyDirectoryView.Problem, .rolledBack(from: 6, to: 4))
        }
        var forgedHead = try head(relay)
        forgedHead[20] ^= 1
        XCTAssertThrowsError(
            try view.checkHead(forgedHead, relayKey: relayKey.publicKey, consistency: [], askedAt: 6)
        ) { XCTAssertEqual($0 as? KeyDirectoryView.Problem, .badTreeHead("authentication failed (wrong key or altered message)")) }
        XCTAssertEqual(view, before)
    }

    func testARelayThatForksTheLogIsCaughtOnItsNextAnswerOrByGossip() throws {
        // Both users see the same first 4 entries; then the relay shows bob a list the
        // operator wrote and alice the honest one.
        var honest = log(4)
        var forked = honest
        honest.append("bob's list")
        forked.append("bob's list as the operator wrote it")
        var alice = KeyDirectoryView()
        var bob = KeyDirectoryView()
        try fetch(4, of: honest, into: &alice)
        try fetch(4, of: forked, into: &bob)
        // Same size, different roots: each sees it in the other's first message.
        XCTAssertEqual(alice.compare(peer: bob.checkpoint!), .forked)
        XCTAssertEqual(bob.compare(peer: alice.checkpoint!), .forked)
        // The log grows for alice: sizes differ, and no proof the relay can make joins them.
        honest.append("carol's list")
        try fetch(5, of: honest, into: &alice)
        guard case .needsProof(let older, let newer) = alice.compare(peer: bob.checkpoint!) else {
            return XCTFail("different sizes need a proof")
        }
        XCTAssertEqual(older, bob.checkpoint)
        for proof in [honest.tree.consistencyProof(oldSize: 5, newSize: 6)!, [], [forked.tree.root]] {
            XCTAssertFalse(KeyDirectoryView.checkGossipProof(older: older, newer: newer, proof: proof))
        }
        // And bob, shown the honest log later, cannot be moved onto it.
        XCTAssertThrowsError(try fetch(5, of: honest, into: &bob)) {
            XCTAssertEqual($0 as? KeyDirectoryView.Problem, .forked(bob.checkpoint!, DirectoryCheckpoint(size: 6, root: honest.tree.root)))
        }
    }

    func testHonestPeersAtDifferentSizesAgreeWithTheRelaysProof() throws {
        var relay = log(3)
        var alice = KeyDirectoryView()
        try fetch(0, of: relay, into: &alice)
        relay.append("dave's list")
        relay.append("erin's list")
        var bob = KeyDirectoryView()
        try fetch(4, of: relay, into: &bob)
        XCTAssertEqual(KeyDirectoryView().compare(peer: bob.checkpoint!), .noHeadYet, "nothing to compare with yet")
        guard case .needsProof(let older, let newer) = bob.compare(peer: alice.checkpoint!) else { return XCTFail("needs a proof") }
        XCTAssertEqual([older.size, newer.size], [3, 5])
        XCTAssertTrue(KeyDirectoryView.checkGossipProof(older: older, newer: newer, proof: relay.tree.consistencyProof(oldSize: 3, newSize: 5)!))
        XCTAssertEqual(alice.compare(peer: alice.checkpoint!), .agrees)
    }
}
