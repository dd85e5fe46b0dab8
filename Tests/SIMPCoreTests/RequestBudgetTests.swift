import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// Control requests within their budgets: per connection, per user, per pair of users for
/// one-time prekey claims, and the requests a connection may have waiting for the store.
final class RequestBudgetTests: XCTestCase {
    private let t0 = DevRelay.t0

    private func relay(_ change: (inout RelayLimits) -> Void) -> DevRelay {
        DevRelay { change(&$0.limits) }
    }

    private func fetch(_ user: String, id: UInt64) -> SIMPMessage { SIMPMessage(kind: .keysFetch, messageId: id, toUser: user) }

    private func fetchRequest(_ user: String, by asker: String, on connection: ConnectionID, id: UInt64) -> RelayAction {
        .store(.fetchKeys(KeysFetch(user: user, skipClaimFor: [], connection: connection, messageId: id, asker: asker)))
    }

    private func who(_ id: UInt64) -> SIMPMessage {
        var who = SIMPMessage(kind: .who, messageId: id)
        who.members = ["bob"]
        return who
    }

    /// A receiving session of `user`'s device `device` on `connection`.
    private func connect(_ relay: inout DevRelay, _ user: String, device: String, on connection: ConnectionID) throws {
        _ = relay.open(connection)
        var connect = DevRelay.connectMessage(user, udpPort: 50_000 + Int(connection.rawValue))
        connect.device = device
        let actions = relay.control(connect, on: connection)
        guard case .store(let register)? = actions.last else { return XCTFail("\(actions)") }
        XCTAssertEqual(relay.answer(DevRelay.done(register)).first.map { if case .send(connection, _) = $0 { true } else { false } }, true)
    }

    func testKeyFetchesOverTheConnectionsBudgetAreRefusedAndTheBudgetRefills() throws {
        var relay = relay { $0.budgets[.keyFetch] = RateLimit(perSecond: 1, burst: 3) }
        try relay.connect("alice", on: ConnectionID(1), port: 50_000)
        try relay.connect("bob", on: ConnectionID(2), port: 50_010)
        let alice = ConnectionID(1)
        for id in 1...3 as ClosedRange<UInt64> {
            XCTAssertEqual(relay.control(fetch("u\(id)", id: id), on: alice), [fetchRequest("u\(id)", by: "alice", on: alice, id: id)])
        }
        XCTAssertEqual(
            relay.control(fetch("u4", id: 4), on: alice),
            [.reject(.requestRateLimited, detail: "keysFetch from alice on c1: this connection over the key-fetch budget"), .pauseReading(alice)])
        XCTAssertEqual(
            relay.control(fetch("u4", id: 5), on: alice),
            [.reject(.requestRateLimited, detail: "keysFetch 5 on c1, paused: told when the pause ends")],
            "what was read with it is refused too")
        XCTAssertEqual(relay.tick(now: t0 + .milliseconds(49)), [])
        var told = SIMPMessage.rateLimited(
            "too many key-fetch requests (this connection), retry in 1 s; 2 requests refused", retryAfter: .milliseconds(950), messageId: 4,
            to: "alice")
        told.receiptIds = [5]
        XCTAssertEqual(
            relay.tick(now: t0 + .milliseconds(50)), [.send(alice, told), .resumeReading(alice)],
            "50 ms later: one ERROR names both refused requests and when to send them again, and the connection is read again")
        XCTAssertEqual(
            relay.control(fetch("u5", id: 5), on: ConnectionID(2)), [fetchRequest("u5", by: "bob", on: ConnectionID(2), id: 5)], "bob is not affected"
        )
        XCTAssertEqual(
            relay.control(fetch("u6", id: 6), on: alice, now: t0 + .seconds(1)), [fetchRequest("u6", by: "alice", on: alice, id: 6)],
            "a token a second")
    }

    func testAConnectionRefusedAgainSoonAfterIsPausedTwiceAsLong() throws {
        var relay = relay { $0.budgets[.who] = RateLimit(perSecond: 0.001, burst: 1) }
        try relay.connect("alice", on: ConnectionID(1), port: 50_000)
        let alice = ConnectionID(1)
        _ = relay.control(who(1), on: alice)
        var pause = TimeAmount.milliseconds(50), now = t0
        for round in 1...3 {
            XCTAssertEqual(relay.control(who(UInt64(round + 1)), on: alice, now: now).last, .pauseReading(alice), "round \(round)")
            XCTAssertEqual(relay.tick(now: now + pause - .nanoseconds(1)), [], "round \(round)")
            let ended = relay.tick(now: now + pause)
            XCTAssertEqual(ended.last, .resumeReading(alice), "round \(round): paused \(pause)")
            guard ended.count == 2, case .send(alice, let error) = ended[0] else { return XCTFail("round \(round): \(ended)") }
            XCTAssertEqual([error.messageId] + error.receiptIds, [UInt64(round + 1)], "one ERROR per pause, for its one request")
            now = now + pause + .milliseconds(10)
            pause = pause * 2
        }
        // Ten seconds without a refusal: the next pause is the first one again.
        now = now + .seconds(11)
        XCTAssertEqual(relay.control(who(9), on: alice, now: now).last, .pauseReading(alice))
        XCTAssertEqual(relay.tick(now: now + .milliseconds(50)).last, .resumeReading(alice))
    }

    /// However many frames a flood had in the read that was refused, its client gets one ERROR
    /// for the pause (its ids listed up to `maxIdsPerRefusal`), not one per frame.
    func testAFloodGetsOneErrorPerPauseListingWhatWasRefused() throws {
        var relay = relay { $0.budgets[.roomJoin] = RateLimit(perSecond: 1, burst: 1) }
        try relay.connect("alice", on: ConnectionID(1), port: 50_000)
        let alice = ConnectionID(1)
        var sent: [RelayAction] = []
        for id in 1...400 as ClosedRange<UInt64> {
            var join = SIMPMessage(kind: .roomJoin, messageId: id)
            join.room = "r\(id)"
            sent += relay.control(join, on: alice)
        }
        XCTAssertEqual(sent.filter { if case .send = $0 { true } else { false } }, [], "nothing told while the pause lasts")
        XCTAssertEqual(sent.filter { $0 == .pauseReading(alice) }.count, 1)
        XCTAssertEqual(sent.filter { if case .reject(.requestRateLimited, _) = $0 { true } else { false } }.count, 399, "each refusal counted")
        let ended = relay.tick(now: t0 + .milliseconds(50))
        XCTAssertEqual(ended.count, 2)
        guard case .send(alice, let error) = ended.first else { return XCTFail("\(ended)") }
        XCTAssertEqual(error.messageId, 2)
        XCTAssertEqual(error.receiptIds, Array(3...257), "ids listed up to the bound")
        XCTAssertEqual(error.errorText, "too many room-join requests (this connection), retry in 1 s; 399 requests refused")
        XCTAssertEqual(relay.tick(now: t0 + .seconds(5)), [], "told once")
    }

    func testAUsersBudgetCoversAllItsConnections() throws {
        var relay = relay { $0.budgets[.who] = RateLimit(perSecond: 1, burst: 2) } // per user: 2/s, burst 4
        for (index, device) in ["phone", "laptop", "tablet"].enumerated() {
            try connect(&relay, "alice", device: device, on: ConnectionID(UInt64(index + 1)))
        }
        for connection in [1, 1, 2, 2] as [UInt64] {
            let actions = relay.control(who(connection), on: ConnectionID(connection))
            guard case .store(.who)? = actions.first else { return XCTFail("\(actions)") }
        }
        let refused = relay.control(who(9), on: ConnectionID(3))
        XCTAssertEqual(refused.first, .reject(.requestRateLimited, detail: "who from alice on c3: alice over the who budget"))
        XCTAssertEqual(refused.last, .pauseReading(ConnectionID(3)))
        let ended = relay.tick(now: t0 + .milliseconds(50))
        guard ended.count == 2, case .send(ConnectionID(3), let error) = ended[0] else { return XCTFail("\(ended)") }
        XCTAssertEqual(error.errorCode, .rateLimited)
        XCTAssertEqual(error.messageId, 9)
        XCTAssertEqual(error.errorText, "too many who requests (alice), retry in 1 s")
        XCTAssertEqual(error.retryAfterMillis, 450, "a token every 500 ms for alice, 50 ms of it gone")
    }

    func testOneRequesterCannotDrainAnothersOneTimePrekeys() throws {
        var relay = relay { $0.prekeyClaims = RateLimit(perSecond: 0.1, burst: 2) }
        try relay.connect("alice", on: ConnectionID(1), port: 50_000)
        try relay.connect("dave", on: ConnectionID(2), port: 50_010)
        let alice = ConnectionID(1)
        XCTAssertEqual(relay.control(fetch("bob", id: 1), on: alice), [fetchRequest("bob", by: "alice", on: alice, id: 1)])
        XCTAssertEqual(relay.control(fetch("bob", id: 2), on: alice), [fetchRequest("bob", by: "alice", on: alice, id: 2)])
        let refused = relay.control(fetch("bob", id: 3), on: alice)
        XCTAssertEqual(
            refused.first, .reject(.requestRateLimited, detail: "keysFetch from alice on c1: alice's fetches of bob's keys over the key-fetch budget")
        )
        XCTAssertEqual(refused.count, 2)
        let ended = relay.tick(now: t0 + .milliseconds(50))
        guard ended.count == 2, case .send(alice, let error) = ended[0] else { return XCTFail("\(ended)") }
        XCTAssertEqual(error.errorText, "too many key-fetch requests (alice's fetches of bob's keys), retry in 10 s")
        XCTAssertEqual(error.retryAfterMillis, 9_950)
        XCTAssertEqual(relay.control(fetch("carol", id: 4), on: alice), [fetchRequest("carol", by: "alice", on: alice, id: 4)], "another target")
        XCTAssertEqual(
            relay.control(fetch("bob", id: 5), on: ConnectionID(2)), [fetchRequest("bob", by: "dave", on: ConnectionID(2), id: 5)],
            "another requester")
    }

    func testAConnectionWithManyRequestsWaitingIsNotReadUntilAnswersComeBack() throws {
        var relay = relay { $0.maxRequestsInFlight = 2 }
        try relay.connect("alice", on: ConnectionID(1), port: 50_000)
        let alice = ConnectionID(1)
        var requests: [StoreRequest] = []
        for id in 1...4 as ClosedRange<UInt64> {
            let actions = relay.control(who(id), on: alice)
            guard case .store(let request)? = actions.first else { return XCTFail("\(actions)") }
            requests.append(request)
            XCTAssertEqual(actions.dropFirst().last, id == 2 ? .pauseReading(alice) : nil, "reading stops at the bound, once (request \(id))")
        }
        XCTAssertEqual(
            relay.control(who(5), on: alice),
            [
                .reject(.requestRateLimited, detail: "who from alice on c1: 4 requests waiting over the who budget")
            ], "frames read before the shell stopped reading: beyond twice the bound, refused (reading had stopped already)")
        XCTAssertEqual(
            relay.tick(now: t0 + .milliseconds(50)),
            [
                .send(
                    alice,
                    .rateLimited(
                        "too many who requests (4 requests waiting), retry in 1 s", retryAfter: .milliseconds(50), messageId: 5, to: "alice"))
            ], "the refusal's pause ends: the client is told; the connection still has its bound waiting, so it is not read")
        for (index, request) in requests.enumerated() {
            guard case .who(let who) = request else { return XCTFail("\(request)") }
            let actions = index == 1 ? relay.fail(request, StoreFailure("down")) : relay.answer(.who(who, []))
            XCTAssertEqual(actions.contains(.resumeReading(alice)), index == 2, "reading goes on below the bound (answer \(index + 1))")
        }
        let again = relay.control(who(6), on: alice)
        guard case .store(.who)? = again.first else { return XCTFail("\(again)") }
    }

    func testAUserLoggingInTooOftenIsRefused() throws {
        var relay = relay { $0.budgets[.login] = RateLimit(perSecond: 0.5, burst: 2) }
        try connect(&relay, "alice", device: "phone", on: ConnectionID(1))
        try connect(&relay, "alice", device: "laptop", on: ConnectionID(2))
        _ = relay.open(ConnectionID(3))
        var connect = DevRelay.connectMessage("alice", udpPort: 50_003)
        connect.device = "tablet"
        XCTAssertEqual(
            relay.control(connect, on: ConnectionID(3)),
            [
                .reject(.requestRateLimited, detail: "login of alice on c3: over alice's login budget"),
                .send(ConnectionID(3), .loginRateLimited("too many logins as alice", retryAfter: .seconds(2))),
                .close(ConnectionID(3)),
            ])
        XCTAssertEqual(relay.core.sessions(of: "alice").count, 2)
    }
}

/// A join the store refuses for a bound on kept state is told to the client as LIMIT_REACHED.
final class StateLimitCoreTests: XCTestCase {
    func testAJoinOverALimitIsToldLimitReached() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: ConnectionID(1), port: 50_000)
        var join = SIMPMessage(kind: .roomJoin, messageId: 5)
        join.room = "lobby"
        let actions = relay.control(join, on: ConnectionID(1))
        guard case .store(.room(let request))? = actions.first else { return XCTFail("\(actions)") }
        XCTAssertEqual(
            relay.answer(.room(request, .limitReached("#lobby has 1000 members, the relay's limit"))),
            [
                .reject(.limitReached, detail: "alice joining #lobby: #lobby has 1000 members, the relay's limit"),
                .send(ConnectionID(1), .error(.limitReached, "#lobby has 1000 members, the relay's limit", messageId: 5)),
            ])
    }
}
