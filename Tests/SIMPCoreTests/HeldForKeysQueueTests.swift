import NIOCore
import SIMPCore
import XCTest

/// Messages held until their receiver's keys can be had (`HeldForKeysQueue`), in virtual time:
/// released in the order typed when the keys arrive, one receiver never waiting for another,
/// given up at the give-up time when the relay could not be asked, never while waiting for a
/// first login.
final class HeldForKeysQueueTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    private let giveUpAfter: TimeAmount = .seconds(120)

    private func message(_ id: UInt64, to peer: String) -> SIMPMessage {
        SIMPMessage(kind: .text, messageId: id, fromUser: "alice", toUser: peer, content: "m\(id)")
    }

    func testHeldMessagesAreReleasedInTheOrderTypedWhenTheKeysArrive() {
        var queue = HeldForKeysQueue(giveUpAfter: giveUpAfter)
        queue.hold(message(1, to: "erin"), now: t0)
        queue.hold(message(2, to: "carol"), now: t0)
        queue.hold(message(3, to: "erin"), now: t0)

        XCTAssertEqual(queue.peers, ["erin", "carol"])
        XCTAssertNil(queue.startSealing(to: "erin", connected: false), "the relay cannot be asked while disconnected")
        let first = queue.startSealing(to: "erin", connected: true)
        XCTAssertEqual(first?.message.messageId, 1)
        XCTAssertNil(queue.startSealing(to: "erin", connected: true), "one at a time per receiver")
        XCTAssertEqual(queue.startSealing(to: "carol", connected: true)?.message.messageId, 2, "carol does not wait for erin")

        XCTAssertEqual(queue.sealFinished(first!, .sealed, now: t0 + .seconds(1)), .send(messageId: 1))
        let second = queue.startSealing(to: "erin", connected: true)
        XCTAssertEqual(second?.message.messageId, 3)
        XCTAssertEqual(queue.sealFinished(second!, .sealed, now: t0 + .seconds(1)), .send(messageId: 3))
        XCTAssertFalse(queue.holds(messagesTo: "erin"))
        XCTAssertTrue(queue.holds(messagesTo: "carol"))
    }

    func testAMessageWaitingForAFirstLoginTellsTheUserOnceAndIsNeverGivenUp() {
        var queue = HeldForKeysQueue(giveUpAfter: giveUpAfter)
        queue.hold(message(1, to: "erin"), now: t0)
        let recheck = t0 + .minutes(4)

        XCTAssertEqual(
            queue.keepWaiting(for: "erin", .forFirstKeys(recheck: recheck)), .init(peer: "erin", at: recheck, tellWaitingForFirstLogin: true))
        XCTAssertEqual(queue.retries, ["erin": recheck])
        let entry = queue.startSealing(to: "erin", connected: true)!
        XCTAssertEqual(queue.retries, [:], "sealing now: the planned retry is off")
        let later = t0 + giveUpAfter + .minutes(10)
        XCTAssertEqual(
            queue.sealFinished(entry, .waiting(.forFirstKeys(recheck: later + .minutes(4))), now: later),
            .wait(.init(peer: "erin", at: later + .minutes(4), tellWaitingForFirstLogin: false)), "told once; never given up")

        XCTAssertEqual(queue.sealFinished(queue.startSealing(to: "erin", connected: true)!, .sealed, now: later), .send(messageId: 1))
        queue.hold(message(2, to: "erin"), now: later)
        XCTAssertTrue(queue.keepWaiting(for: "erin", .forFirstKeys(recheck: later)).tellWaitingForFirstLogin, "a new wait is told again")
    }

    func testAMessageHeldForTheRelayIsGivenUpAtItsGiveUpTimeWithTheReason() {
        var queue = HeldForKeysQueue(giveUpAfter: giveUpAfter)
        queue.hold(message(1, to: "bob"), now: t0)
        queue.hold(message(2, to: "bob"), now: t0 + .seconds(60))

        let early = t0 + giveUpAfter - .milliseconds(1)
        XCTAssertEqual(
            queue.sealFinished(queue.startSealing(to: "bob", connected: true)!, .waiting(.forRelay(retry: early + .seconds(2))), now: early),
            .wait(.init(peer: "bob", at: early + .seconds(2), tellWaitingForFirstLogin: false)))
        let due = t0 + giveUpAfter
        XCTAssertEqual(
            queue.sealFinished(queue.startSealing(to: "bob", connected: true)!, .waiting(.forRelay(retry: due + .seconds(2))), now: due),
            .giveUp(messageId: 1, after: giveUpAfter))
        XCTAssertEqual(
            queue.sealFinished(queue.startSealing(to: "bob", connected: true)!, .waiting(.forRelay(retry: nil)), now: due),
            .wait(.init(peer: "bob", at: nil, tellWaitingForFirstLogin: false)), "the next one was held later: it waits, for the next login")
        XCTAssertEqual(queue.entries.map(\.message.messageId), [2])
    }

    func testAMessageThatCanNeverBeSealedFails() {
        var queue = HeldForKeysQueue(giveUpAfter: giveUpAfter)
        queue.hold(message(1, to: "bob"), now: t0)
        XCTAssertEqual(queue.sealFinished(queue.startSealing(to: "bob", connected: true)!, .cannotSeal, now: t0), .fail(messageId: 1))
        XCTAssertEqual(queue.entries, [])
    }

    func testALostConnectionStopsTheRetriesAndKeepsTheMessages() {
        var queue = HeldForKeysQueue(giveUpAfter: giveUpAfter)
        queue.hold(message(1, to: "erin"), now: t0)
        queue.hold(message(2, to: "bob"), now: t0)
        _ = queue.keepWaiting(for: "erin", .forFirstKeys(recheck: t0 + .minutes(4)))
        _ = queue.keepWaiting(for: "bob", .forRelay(retry: t0 + .seconds(2)))

        XCTAssertEqual(queue.connectionLostForGood(), [1, 2])
        XCTAssertEqual(queue.retries, [:])
        XCTAssertEqual(queue.peers, ["erin", "bob"], "kept for the user's next connect")
        XCTAssertTrue(queue.keepWaiting(for: "erin", .forFirstKeys(recheck: t0)).tellWaitingForFirstLogin, "told again after a new connect")
    }
}
