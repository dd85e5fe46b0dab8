import XCTest

@testable import SIMPE2E

/// Answers that cross in flight (docs/E2E.md §18.4): a client asks the relay twice from one
/// known size and the first answer moves its view before the second arrives. Such a stale
/// answer is neither taken nor an alarm (the client asks again), while a relay that really
/// forks or rolls back its log is still caught, whatever size the client asked from.
final class KeyDirectoryStaleAnswerTests: XCTestCase {
    private let relayKey: TreeHeadSigningKey = {
        var random = SeededRandom(seed: 53)
        return TreeHeadSigningKey(using: &random)
    }()

    private func log(_ texts: [String]) -> (tree: MerkleTree, entries: [[UInt8]]) {
        var tree = MerkleTree()
        for text in texts { tree.append(leafData: Array(text.utf8)) }
        return (tree, texts.map { Array($0.utf8) })
    }

    private func lists(_ count: Int) -> [String] { (0..<count).map { "list \($0)" } }

    /// The relay's answer for the last entry of `texts`, made for a client that said it knew
    /// `known` entries, checked by `view` as asked at `askedAt` (`known` unless said).
    @discardableResult
    private func answer(_ texts: [String], known: Int, into view: inout KeyDirectoryView, askedAt: Int? = nil) throws(KeyDirectoryView.Problem)
        -> KeyDirectoryView.Verdict
    {
        let (tree, entries) = log(texts)
        let index = entries.count - 1
        let head = try! SignedTreeHead.signed(size: UInt64(tree.size), root: tree.root, timestampMillis: 1_000, by: relayKey)
        return try view.checkEntry(
            leafData: entries[index], index: UInt64(index), proof: tree.inclusionProof(index: index, size: tree.size)!, head: head.encoded,
            relayKey: relayKey.publicKey, consistency: tree.consistencyProof(oldSize: known, newSize: tree.size) ?? [],
            askedAt: UInt64(askedAt ?? known))
    }

    /// A view that verified the first `size` entries of the honest log.
    private func view(at size: Int) throws -> KeyDirectoryView {
        var view = KeyDirectoryView()
        try answer(lists(size), known: 0, into: &view)
        XCTAssertEqual(view.latest?.size, UInt64(size))
        return view
    }

    func testTwoAnswersAskedFromOneKnownSizeRaiseNoAlarm() throws {
        var view = try view(at: 2)
        XCTAssertEqual(try answer(lists(3), known: 2, into: &view), .proved)
        XCTAssertEqual(try answer(lists(3), known: 2, into: &view), .proved, "the same head again, its proof from 2 notwithstanding")
        XCTAssertEqual(view.latest?.size, 3)
    }

    func testABiggerHeadProvedFromASizeTheViewLeftIsStaleAndProvedWhenAskedAgain() throws {
        var view = try view(at: 2)
        XCTAssertEqual(try answer(lists(3), known: 2, into: &view), .proved)
        let before = view
        XCTAssertEqual(try answer(lists(4), known: 2, into: &view), .stale)
        XCTAssertEqual(view, before, "nothing taken from a stale answer")
        XCTAssertEqual(try answer(lists(4), known: 3, into: &view), .proved, "asked again from the view's size")
        XCTAssertEqual(view.latest?.size, 4)
    }

    func testASmallerHeadThanOneAdoptedSinceTheRequestIsStale() throws {
        var view = try view(at: 2)
        XCTAssertEqual(try answer(lists(4), known: 2, into: &view), .proved)
        XCTAssertEqual(try answer(lists(3), known: 2, into: &view), .stale, "made before the head of 4 was adopted")
        XCTAssertEqual(view.latest?.size, 4)
    }

    func testAnotherRootAtTheViewsSizeIsAForkWhateverSizeItWasAskedFrom() throws {
        let forked = ["list 0", "list 1", "a list the operator wrote"]
        for known in [2, 3] {
            var view = try view(at: 3)
            XCTAssertThrowsError(try answer(forked, known: known, into: &view)) {
                guard case .forked = $0 as? KeyDirectoryView.Problem else { return XCTFail("\($0)") }
            }
        }
    }

    func testABiggerForkedHeadWithAProofFromTheViewsSizeIsAFork() throws {
        var view = try view(at: 3)
        let forked = ["list 0", "list 1", "a list the operator wrote", "list 3", "list 4"]
        XCTAssertThrowsError(try answer(forked, known: 3, into: &view)) {
            guard case .forked = $0 as? KeyDirectoryView.Problem else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(view.latest?.size, 3)
    }

    func testASmallerHeadAskedFromTheViewsSizeIsARollback() throws {
        var view = try view(at: 4)
        XCTAssertThrowsError(try answer(lists(3), known: 3, into: &view, askedAt: 4)) {
            XCTAssertEqual($0 as? KeyDirectoryView.Problem, .rolledBack(from: 4, to: 3))
        }
        // Smaller than the size asked from, though the view moved since: still a rollback.
        XCTAssertThrowsError(try answer(lists(2), known: 2, into: &view, askedAt: 3)) {
            XCTAssertEqual($0 as? KeyDirectoryView.Problem, .rolledBack(from: 4, to: 2))
        }
    }

    // MARK: What the client does with each answer (KeyDirectoryFetch)

    /// The view's judgement of the relay's answer for the last entry of `texts`, made for a
    /// client that said it knew `known` entries, asked from `fetch.askedAt`.
    private func judged(_ texts: [String], known: Int, fetch: KeyDirectoryFetch, into view: inout KeyDirectoryView)
        -> Result<KeyDirectoryView.Verdict, KeyDirectoryView.Problem>
    {
        do { return .success(try answer(texts, known: known, into: &view, askedAt: Int(fetch.askedAt))) } catch { return .failure(error) }
    }

    func testAnAnswerProvedTheFirstTimeOrCarryingNoProofIsTaken() throws {
        XCTAssertEqual(KeyDirectoryFetch(from: KeyDirectoryView()).askedAt, 0, "a view that saw nothing asks from 0")
        var view = try view(at: 2)
        var fetch = KeyDirectoryFetch(from: view)
        XCTAssertEqual(fetch.askedAt, 2)
        XCTAssertEqual(fetch.answered(judged(lists(3), known: 2, fetch: fetch, into: &view), view: view), .take)
        XCTAssertEqual(view.latest?.size, 3)
        XCTAssertEqual(fetch.answered(nil, view: view), .take, "a relay that keeps no log: taken as before")
        XCTAssertEqual(fetch.staleAnswers, 0)
    }

    func testAStaleAnswerIsAskedAgainFromTheViewsNewSizeAndTheFreshAnswerTaken() throws {
        var view = try view(at: 2)
        var fetch = KeyDirectoryFetch(from: view)
        try answer(lists(3), known: 2, into: &view) // another fetch's answer arrives first
        let before = view
        let stale = judged(lists(4), known: 2, fetch: fetch, into: &view)
        XCTAssertEqual(stale, .success(.stale))
        XCTAssertEqual(fetch.answered(stale, view: view), .askAgain(knownTreeSize: 3))
        XCTAssertEqual(view, before, "nothing taken from the stale answer")
        XCTAssertEqual(fetch.askedAt, 3)
        let fresh = judged(lists(4), known: 3, fetch: fetch, into: &view)
        XCTAssertEqual(fetch.answered(fresh, view: view), .take)
        XCTAssertEqual(fetch.staleAnswers, 1)
        XCTAssertEqual(view.latest?.size, 4)
    }

    func testThreeStaleAnswersGiveUpForNowWithoutAnAlarm() throws {
        var view = try view(at: 2)
        var fetch = KeyDirectoryFetch(from: view)
        var steps: [KeyDirectoryFetch.Step] = []
        for size in 3...5 {
            try answer(lists(size), known: size - 1, into: &view) // the view moves under each request
            let stale = judged(lists(size + 1), known: Int(fetch.askedAt), fetch: fetch, into: &view)
            XCTAssertEqual(stale, .success(.stale))
            steps.append(fetch.answered(stale, view: view))
        }
        XCTAssertEqual(steps, [.askAgain(knownTreeSize: 3), .askAgain(knownTreeSize: 4), .giveUp])
        XCTAssertEqual(fetch.staleAnswers, 3)
        XCTAssertEqual(view.latest?.size, 5, "no stale answer's head was adopted")
        var once = KeyDirectoryFetch(from: view, repeats: 0)
        XCTAssertEqual(once.answered(.success(.stale), view: view), .giveUp, "no repeats: the first stale answer gives up")
    }

    func testAForkedAnswerIsRefusedAtOnceOrAfterAStaleOne() throws {
        let forked = ["list 0", "list 1", "a list the operator wrote", "list 3", "list 4"]
        var view = try view(at: 3)
        var fetch = KeyDirectoryFetch(from: view)
        let step = fetch.answered(judged(forked, known: 3, fetch: fetch, into: &view), view: view)
        guard case .refuse(.forked) = step else { return XCTFail("\(step)") }
        XCTAssertEqual(view.latest?.size, 3)

        fetch = KeyDirectoryFetch(from: view)
        try answer(lists(4), known: 3, into: &view)
        XCTAssertEqual(fetch.answered(judged(lists(5), known: 3, fetch: fetch, into: &view), view: view), .askAgain(knownTreeSize: 4))
        let again = fetch.answered(judged(forked, known: 4, fetch: fetch, into: &view), view: view)
        guard case .refuse(.forked) = again else { return XCTFail("the fresh answer is judged from the new head: \(again)") }
        XCTAssertEqual(view.latest?.size, 4)
    }

    func testARolledBackAnswerIsRefused() throws {
        var view = try view(at: 4)
        var fetch = KeyDirectoryFetch(from: view)
        XCTAssertEqual(fetch.answered(judged(lists(3), known: 3, fetch: fetch, into: &view), view: view), .refuse(.rolledBack(from: 4, to: 3)))
    }
}
