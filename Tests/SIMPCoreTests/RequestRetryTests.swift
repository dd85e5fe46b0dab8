import NIOCore
import SIMPCore
import XCTest

/// A control request the relay refuses over its budget (ERROR RATE_LIMITED with
/// `retryAfterMillis`) is sent again after that long, in virtual time, while that is before
/// the request's deadline (`ClientSession.requestTimeout`); otherwise it fails, and one never
/// answered fails at its deadline.
final class RequestRetryTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    private let keys = SessionKeys(sessionId: 42, secret: Array(repeating: 7, count: 32))

    private func registered() -> ClientSession {
        var configuration = ClientSession.Configuration(user: "alice", firstMessageId: 100)
        configuration.reconnect = nil
        var client = ClientSession(configuration: configuration)
        _ = client.registered(keys: keys, now: t0)
        return client
    }

    func testARateLimitedRequestIsSentAgainAfterRetryAfterAndItsAnswerIsTheReply() {
        var client = registered()
        let join = client.request(.roomJoin, room: "ops", now: t0)
        let refused = client.controlReceived(
            .rateLimited("too many room-join requests", retryAfter: .milliseconds(300), messageId: join.messageId), now: t0 + .milliseconds(10))
        XCTAssertEqual(refused.replies, [], "not failed: it will be sent again")
        XCTAssertEqual(client.nextDeadline.map { $0 <= t0 + .milliseconds(310) }, true, "the session wants to be polled for it")
        let early = client.poll(now: t0 + .milliseconds(309))
        XCTAssertFalse(early.controlFrames.contains(join), "not before retryAfter")
        let due = client.poll(now: t0 + .milliseconds(310))
        XCTAssertEqual(due.controlFrames.filter { $0.kind == .roomJoin }, [join], "the same request, same id")
        let later = client.poll(now: t0 + .milliseconds(400))
        XCTAssertFalse(later.controlFrames.contains(join), "sent again once")
        var answer = SIMPMessage(kind: .roomMembers, messageId: join.messageId)
        answer.members = ["alice"]
        let answered = client.controlReceived(answer, now: t0 + .milliseconds(420))
        XCTAssertEqual(answered.replies, [RequestReply(requestId: join.messageId, result: .success(["alice"]))])
    }

    /// The relay tells every request it refused during one pause in one ERROR (`messageId` and
    /// `receiptIds`): each is sent again after `retryAfterMillis`.
    func testEveryRequestOneRateLimitedNamesIsSentAgain() {
        var client = registered()
        let joins = ["a", "b", "c"].map { client.request(.roomJoin, room: $0, now: t0) }
        var refused = SIMPMessage.rateLimited("too many room-join requests", retryAfter: .milliseconds(300), messageId: joins[1].messageId)
        refused.receiptIds = [joins[2].messageId]
        XCTAssertEqual(client.controlReceived(refused, now: t0 + .milliseconds(60)).replies, [], "neither failed")
        XCTAssertEqual(client.poll(now: t0 + .milliseconds(359)).controlFrames.filter { $0.kind == .roomJoin }, [])
        XCTAssertEqual(
            client.poll(now: t0 + .milliseconds(360)).controlFrames.filter { $0.kind == .roomJoin }, [joins[1], joins[2]],
            "both refused joins again, the first one (answered meanwhile or not) not")
    }

    func testARetryAfterBeyondTheDeadlineFailsTheRequestAtOnce() {
        var client = registered()
        let who = client.request(.who, users: ["bob"], now: t0, timeout: .seconds(2))
        let text = "too many who requests"
        let refused = client.controlReceived(.rateLimited(text, retryAfter: .seconds(3), messageId: who.messageId), now: t0)
        XCTAssertEqual(refused.replies, [RequestReply(requestId: who.messageId, result: .failure(.refused(code: .rateLimited, text: text)))])
    }

    func testARequestNeverAnsweredFailsAtItsDeadline() {
        var client = registered()
        let fetch = client.request(.keysFetch, now: t0) { $0.toUser = "bob" }
        XCTAssertEqual(fetch.toUser, "bob")
        XCTAssertEqual(client.poll(now: t0 + ClientSession.requestTimeout - .milliseconds(1)).replies, [])
        let timedOut = client.poll(now: t0 + ClientSession.requestTimeout)
        XCTAssertEqual(timedOut.replies, [RequestReply(requestId: fetch.messageId, result: .failure(.timedOut))])
    }
}
