import NIOCore
import SIMPCore
import SIMPE2E
import XCTest

/// The messages a device keeps to send again when a peer device asks (`SentLog`, docs/E2E.md
/// §7.5), in virtual time: each at most once, only to its receiver's devices that had a copy,
/// for a bounded number and time, and what each request is answered.
final class SentLogTests: XCTestCase {
    private let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    private func identity(_ seed: UInt64) -> IdentityKey {
        var random = SplitMix64(seed: seed)
        return DeviceIdentity(using: &random).publicKey
    }

    func testAMessageIsSentAgainOnceAndOnlyToItsReceiver() {
        var log = SentLog()
        log.record(1, SIMPMessage(kind: .text, toUser: "bob", content: "hi"), now: start)
        XCTAssertNil(log.takeForResend(1, to: "mallory"), "another user cannot have it")
        XCTAssertEqual(log.takeForResend(1, to: "bob")?.message?.content, "hi")
        XCTAssertNil(log.takeForResend(1, to: "bob"), "never twice")
        XCTAssertTrue(log.contains(1))
        XCTAssertNil(log.takeForResend(2, to: "bob"), "never sent")
    }

    func testAFrameOfTheEndToEndLayerIsKeptWithoutContent() {
        var log = SentLog()
        log.record(3, nil, now: start) // a resend request or a sender key
        XCTAssertNil(log.takeForResend(3, to: "bob")?.message)
    }

    func testTheLogIsBoundedInCountAndTime() {
        var log = SentLog()
        for id in 1...UInt64(SentLog.maxKept + 1) { log.record(id, SIMPMessage(kind: .text, toUser: "bob"), now: start) }
        XCTAssertFalse(log.contains(1), "the oldest went")
        XCTAssertTrue(log.contains(2))
        log.record(10_000, SIMPMessage(kind: .text, toUser: "bob"), now: start + SentLog.lifetime + .seconds(1))
        XCTAssertFalse(log.contains(2), "older than the lifetime")
        XCTAssertTrue(log.contains(10_000))

        var timed = SentLog()
        timed.record(1, SIMPMessage(kind: .text, toUser: "bob"), now: start)
        timed.record(2, SIMPMessage(kind: .text, toUser: "bob"), now: start + SentLog.lifetime)
        XCTAssertTrue(timed.contains(1), "kept for exactly the lifetime")
        timed.record(3, SIMPMessage(kind: .text, toUser: "bob"), now: start + SentLog.lifetime + .nanoseconds(1))
        XCTAssertFalse(timed.contains(1))
        XCTAssertTrue(timed.contains(2))
    }

    func testARequestIsAnsweredOnlyForADeviceThatHadACopyWithTheSameIdentity() {
        var log = SentLog()
        let message = SIMPMessage(kind: .text, toUser: "bob", content: "hi")
        let recipients = ResendRecipients(copies: ["phone"], known: [("phone", identity(1)), ("laptop", identity(2))])
        log.record(7, message, recipients: recipients, now: start)

        XCTAssertEqual(log.answer(7, askedBy: "bob", device: "laptop", identity: identity(2)), .refused, "no copy then")
        XCTAssertEqual(log.answer(7, askedBy: "bob", device: "phone", identity: identity(3)), .refused, "another key since")
        XCTAssertEqual(log.answer(7, askedBy: "bob", device: "phone", identity: nil), .refused, "no key known")
        XCTAssertEqual(log.answer(7, askedBy: "bob", device: "phone", identity: identity(1)), .sendAgain(message))
        XCTAssertEqual(log.answer(7, askedBy: "bob", device: "phone", identity: identity(1)), .ignored, "never twice")
        XCTAssertEqual(log.answer(7, askedBy: "bob", device: "laptop", identity: identity(2)), .refused, "refused even after")
    }

    func testARequestForAnotherUsersFrameOrForgottenMessageIsIgnoredOrNotKept() {
        var log = SentLog()
        log.record(1, SIMPMessage(kind: .text, toUser: "bob", content: "hi"), now: start)
        log.record(2, nil, now: start) // a sender key
        XCTAssertEqual(log.answer(1, askedBy: "mallory", device: "x", identity: nil), .ignored, "only its receiver")
        XCTAssertEqual(log.answer(2, askedBy: "bob", device: "phone", identity: nil), .ignored, "a frame of this layer")
        XCTAssertEqual(log.answer(2, askedBy: "bob", device: "phone", identity: nil), .ignored)
        XCTAssertEqual(log.answer(3, askedBy: "bob", device: "phone", identity: nil), .notKept, "never sent, or forgotten")
        XCTAssertEqual(
            log.answer(1, askedBy: "bob", device: "phone", identity: nil), .sendAgain(SIMPMessage(kind: .text, toUser: "bob", content: "hi")))
    }

    func testAMessageSentAgainIsNeverSentAgainASecondTime() {
        var log = SentLog()
        let message = SIMPMessage(kind: .text, toUser: "bob", content: "hi")
        log.recordResent(8, message, now: start)
        XCTAssertTrue(log.contains(8))
        XCTAssertEqual(log.entries[8]?.message, message)
        XCTAssertEqual(log.answer(8, askedBy: "bob", device: "phone", identity: nil), .ignored)
    }
}
