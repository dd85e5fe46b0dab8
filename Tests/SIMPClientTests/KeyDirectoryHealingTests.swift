import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// The relay's key directory heals itself, with a real relay and a real Redis: a Redis that
/// restarts empty, or is down for a while, fails no end-to-end message; a message to a user who
/// never logged in waits for that user's keys (never a suggestion to send it unencrypted).
final class KeyDirectoryHealingTests: XCTestCase {
    private var home: URL!
    private var redis: RedisServerProcess!
    private var relay: TestRelay!

    override func setUp() async throws {
        home = FileManager.default.temporaryDirectory.appendingPathComponent("simp-e2e-heal-\(UUID().uuidString)")
        redis = try await RedisServerProcess.startPrivate()
        relay = try await TestRelay.start(redis: redis) { $0.registrationTTLSeconds = 3 } // refresh every 1 s
    }

    override func tearDown() async throws {
        await relay.stop()
        try? FileManager.default.removeItem(at: home)
    }

    private func connect(_ user: String, device: String, outbox: Outbox? = nil) async throws -> SIMPClient {
        try await relay.connectClient(user: user) { configuration in
            configuration.device = device
            configuration.endToEnd = EndToEndSettings(home: self.home)
            configuration.outbox = outbox
            configuration.retransmit.maxAttempts = nil // only the give-up time ends a message, as in production
        }
    }

    /// Redis restarts without its data and the operator adds the users again: bob's bundle is
    /// gone, and bob does not restart. alice's first message to bob finds no bundle; the relay
    /// asks bob's session to publish again, tells alice when it did, and her message goes end
    /// to end, well within 30 s.
    func testANewConversationWorksAfterRedisLostItsDataWithoutThePeerRestarting() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let inbox = MessageInbox(try await connect(bob, device: "phone"))
        let aliceClient = try await connect(alice, device: "desk")

        try await redis.restart()
        _ = try? await relay.inspector.command(["PING"]) // the inspector's connection died with Redis; this reconnects it
        let bundles = try await relay.inspector.command(["EXISTS", KeyBundleStore.bundlesKey(bob)]).integer
        XCTAssertEqual(bundles, 0, "the restarted Redis lost bob's bundle")
        try await relay.addUser(alice)
        try await relay.addUser(bob)

        let started = NIODeadline.now()
        let outcome = try await aliceClient.send(text: "hello after the data loss", to: bob)
        guard case .delivered = outcome else { return XCTFail("\(outcome)") }
        let arrived = await inbox.waitFor(1, within: .seconds(30))
        XCTAssertTrue(arrived)
        XCTAssertLessThan(NIODeadline.now() - started, .seconds(30))
        let messages = await inbox.messages
        XCTAssertEqual(messages.map(\.content), ["hello after the data loss"])
        XCTAssertEqual(messages.map(\.isEndToEnd), [true])
        let republished = try await relay.inspector.command(["HEXISTS", KeyBundleStore.bundlesKey(bob), "phone"]).integer
        XCTAssertEqual(republished, 1, "bob's client published its bundle again")
    }

    /// Redis is down for 20 s while alice writes to bob (a conversation under way) and to carol
    /// (a first message: her devices must be fetched, and the relay cannot answer). Nothing
    /// fails: carol's message waits and is asked for again until Redis is back (empty: the users
    /// are added again), then goes end to end.
    func testRedisDownForTwentySecondsFailsNoEndToEndMessage() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob"), carol = TestRelay.uniqueUser("carol")
        let bobInbox = MessageInbox(try await connect(bob, device: "phone"))
        let carolInbox = MessageInbox(try await connect(carol, device: "laptop"))
        let aliceClient = try await connect(alice, device: "desk")
        guard case .delivered = try await aliceClient.send(text: "before", to: bob) else { return XCTFail("not delivered") }

        await redis.stop()
        var outcomes: [EventLoopFuture<SendResult>] = []
        outcomes.append(try await aliceClient.submit(SIMPMessage(kind: .text, toUser: carol, content: "first words to carol")).result)
        for second in 1...5 {
            outcomes.append(try await aliceClient.submit(SIMPMessage(kind: .text, toUser: bob, content: "during \(second)")).result)
            try await Task.sleep(nanoseconds: 3_000_000_000) // the outage itself: a message every 3 s
        }
        try await Task.sleep(nanoseconds: 5_000_000_000) // Redis down 20 s in all (longer than a key fetch's 10 s)
        try await redis.relaunch()
        for user in [alice, bob, carol] { try await relay.addUser(user) }

        for outcome in outcomes {
            let result = try await outcome.get()
            if case .failed = result { XCTFail("\(result)") }
            if case .connectionLost = result { XCTFail("\(result)") }
        }
        let carolGot = await carolInbox.waitFor(1, within: .seconds(30)), bobGot = await bobInbox.waitFor(6, within: .seconds(30))
        XCTAssertTrue(carolGot && bobGot)
        let (toCarol, toBob) = (await carolInbox.messages, await bobInbox.messages)
        XCTAssertEqual(toCarol.map(\.content), ["first words to carol"])
        XCTAssertEqual(toCarol.map(\.isEndToEnd), [true])
        XCTAssertEqual(toBob.map(\.content), ["before"] + (1...5).map { "during \($0)" })
    }

    /// erin was created by the operator and never logged in, so she has no keys. alice's message
    /// to her is not refused: it waits in alice's outbox (also across a restart of alice's
    /// client), alice is told it waits for erin's first login, and at that login it arrives end
    /// to end.
    func testAMessageToAUserWhoNeverLoggedInIsDeliveredEndToEndAtHerFirstLogin() async throws {
        let alice = TestRelay.uniqueUser("alice"), erin = TestRelay.uniqueUser("erin")
        try await relay.addUser(erin)
        let outbox = try Outbox(home: home, user: alice, device: "desk")
        var aliceClient = try await connect(alice, device: "desk", outbox: outbox)
        var notices = EndToEndNoticeLog(aliceClient)
        let first = try await aliceClient.submit(SIMPMessage(kind: .text, toUser: erin, content: "welcome, erin"))
        let told = await notices.waitFor { $0 == .waitingForFirstLogin(user: erin) }
        XCTAssertTrue(told)
        XCTAssertEqual(
            EndToEndNotice.waitingForFirstLogin(user: erin).description,
            "waiting for \(erin)'s first login: \(erin) has no end-to-end keys yet; the message stays in the outbox and is sent, end to end, then")
        XCTAssertEqual(outbox.load().messages.map(\.messageId), [first.messageId], "kept in the outbox")

        let firstOutcome = Task { try await first.result.get() } // waited for before the close, which completes it
        await aliceClient.close()
        guard case .connectionLost = try await firstOutcome.value else { return XCTFail("still waiting when alice closed") }
        aliceClient = try await connect(alice, device: "desk", outbox: outbox)
        notices = EndToEndNoticeLog(aliceClient)
        let resent = try await aliceClient.resendOutbox().resent
        XCTAssertEqual(resent.map(\.message.content), ["welcome, erin"])
        let toldAgain = await notices.waitFor { $0 == .waitingForFirstLogin(user: erin) }
        XCTAssertTrue(toldAgain)

        let erinInbox = MessageInbox(try await connect(erin, device: "phone"))
        let arrived = await erinInbox.waitFor(1)
        XCTAssertTrue(arrived)
        let messages = await erinInbox.messages
        XCTAssertEqual(messages.map(\.content), ["welcome, erin"])
        XCTAssertEqual(messages.map(\.isEndToEnd), [true])
        XCTAssertEqual(messages.map(\.messageId), [first.messageId], "with the id it was written with")
        let outcome = try await resent[0].result.get()
        guard case .delivered = outcome else { return XCTFail("\(outcome)") }
        XCTAssertEqual(outbox.count, 0)
    }

    /// bob loses his keys (his device's state is deleted) and logs in again with new ones, under
    /// the same device name. carol's next post to their room is readable by him: she learns of
    /// his new key and sends a new sender key to every member before the post.
    func testARoomMemberWhoseKeysWereResetReadsTheNextPost() async throws {
        let bob = TestRelay.uniqueUser("bob"), carol = TestRelay.uniqueUser("carol")
        let room = TestRelay.uniqueUser("ops")
        var bobClient = try await connect(bob, device: "phone")
        var bobInbox = MessageInbox(bobClient)
        let carolClient = try await connect(carol, device: "desk")
        _ = try await bobClient.joinRoom(room)
        _ = try await carolClient.joinRoom(room)
        _ = try await carolClient.send(text: "one", toRoom: room)
        let first = await bobInbox.waitFor(1)
        XCTAssertTrue(first)

        await bobClient.close()
        try FileManager.default.removeItem(at: EndToEndFileStore(home: home, user: bob, device: "phone").directory)
        bobClient = try await connect(bob, device: "phone") // new keys: the relay tells carol, who fetched his
        bobInbox = MessageInbox(bobClient)
        _ = try await carolClient.who([bob]) // behind the relay's notice
        _ = try await carolClient.send(text: "two", toRoom: room)
        let arrived = await Eventually.holds { await bobInbox.messages.contains { $0.content == "two" } }
        XCTAssertTrue(arrived, "bob read the post made after his keys were reset")
        let messages = await bobInbox.messages
        XCTAssertEqual(messages.filter { $0.content == "two" }.map(\.isEndToEnd), [true])
    }
}
