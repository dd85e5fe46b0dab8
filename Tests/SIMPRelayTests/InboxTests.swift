import NIOCore
import NIOPosix
import SIMPClient
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// Offline store-and-forward against a real Redis and a real relay.
final class InboxTests: XCTestCase {
    private var relay: TestRelay!

    override func tearDown() async throws {
        await relay?.stop()
    }

    private func start(configure: (inout RelayConfiguration) -> Void = { _ in }) async throws {
        relay = try await TestRelay.start(configure: configure)
    }

    /// A user who registered once and left: known to the relay, without a session.
    private func offlineUser(_ name: String) async throws -> String {
        let user = TestRelay.uniqueUser(name)
        let client = try await relay.connectClient(user: user)
        await client.close()
        let gone = try await Eventually.holds { try await self.relay.inspector.command(["EXISTS", "simp:user:{\(user)}"]).integer == 0 }
        XCTAssertTrue(gone, "\(user)'s registration is still in Redis")
        return user
    }

    private func inboxLength(_ user: String) async throws -> Int64 {
        Int64(try await relay.inspector.pendingEntries(user).count) // the default device's
    }

    func testMessageForOfflineUserIsStoredThenDeliveredOnceAndTheSenderHearsBoth() async throws {
        try await start()
        let bob = try await offlineUser("bob")
        let aliceClient = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))
        let notices = NoticeLog(aliceClient)

        let first = try await aliceClient.send(text: "while you were out", to: bob)
        let second = try await aliceClient.send(text: "and another", to: bob)

        guard case .stored(let id1, _) = first, case .stored(let id2, _) = second else { return XCTFail("\(first) \(second)") }
        let storedCount = try await inboxLength(bob)
        XCTAssertEqual(storedCount, 2)
        let storedNotice = await notices.waitFor { $0 == .stored(messageId: id1, to: bob) }
        XCTAssertTrue(storedNotice)

        let bobClient = try await relay.connectClient(user: bob)
        let inbox = MessageInbox(bobClient)
        let arrived = await inbox.waitFor(2)
        XCTAssertTrue(arrived)
        let delivered = await notices.waitFor { $0 == .delivered(messageId: id2, to: bob) }
        XCTAssertTrue(delivered, "the sender hears that its stored message was delivered")
        _ = await Eventually.stays { await inbox.messages.count == 2 } // quiet period: room for a duplicate to show up
        let messages = await inbox.messages
        XCTAssertEqual(messages.map(\.messageId), [id1, id2], "in order, exactly once")
        XCTAssertEqual(messages.map(\.content), ["while you were out", "and another"])
        let emptied = try await Eventually.holds { try await self.inboxLength(bob) == 0 }
        XCTAssertTrue(emptied, "delivered entries leave the inbox")
        let all = await notices.notices
        XCTAssertEqual(all.filter { $0 == .delivered(messageId: id1, to: bob) }.count, 1)
        let stats = try await relay.server.statistics()
        XCTAssertEqual(stats.inboxStored, 2)
    }

    func testDeliveredReceiptWaitsForASenderWhoLeft() async throws {
        try await start()
        let bob = try await offlineUser("bob")
        let alice = TestRelay.uniqueUser("alice")
        let aliceClient = try await relay.connectClient(user: alice)
        guard case .stored(let id, _) = try await aliceClient.send(text: "ping me back", to: bob) else { return XCTFail("not stored") }
        await aliceClient.close()

        let bobClient = try await relay.connectClient(user: bob)
        let inbox = MessageInbox(bobClient)
        let arrived = await inbox.waitFor(1)
        XCTAssertTrue(arrived)
        let receiptStored = try await Eventually.holds { try await self.inboxLength(alice) == 1 }
        XCTAssertTrue(receiptStored, "the delivered receipt waits in the sender's inbox")

        let aliceAgain = try await relay.connectClient(user: alice)
        let notices = NoticeLog(aliceAgain)
        let delivered = await notices.waitFor { $0 == .delivered(messageId: id, to: bob) }
        XCTAssertTrue(delivered)
        let emptied = try await Eventually.holds { try await self.inboxLength(alice) == 0 }
        XCTAssertTrue(emptied)
    }

    /// A full log refuses the new message (what it stored stays: a STORED is a promise); its
    /// sender keeps it, sends it again, and it arrives once the receiver is back (§6.6).
    func testAFullInboxRefusesTheNewMessageAndItsSenderRetriesUntilTheReceiverIsBack() async throws {
        try await start { $0.inboxMaxMessages = 2 }
        let bob = try await offlineUser("bob")
        let aliceClient = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))
        let notices = NoticeLog(aliceClient)
        for text in ["one", "two"] {
            guard case .stored = try await aliceClient.send(text: text, to: bob) else { return XCTFail("not stored") }
        }
        let (_, third) = try await aliceClient.submit(SIMPMessage(kind: .text, toUser: bob, content: "three"))

        let refused = try await Eventually.holds { try await self.relay.server.statistics().rejected[.inboxFull] ?? 0 >= 1 }
        XCTAssertTrue(refused, "the full log refused the third message")
        let length = try await inboxLength(bob)
        XCTAssertEqual(length, 2, "nothing stored was dropped to make room")
        let discarded = await notices.notices.filter { if case .discarded = $0 { return true } else { return false } }
        XCTAssertEqual(discarded, [], "no stored message is reported discarded")

        let bobClient = try await relay.connectClient(user: bob)
        let inbox = MessageInbox(bobClient)
        _ = await inbox.waitFor(3) // the refused one comes with its sender's next retransmission
        let contents = await inbox.messages.map(\.content)
        XCTAssertEqual(contents, ["one", "two", "three"], "all three, once and in order")
        let outcome = try await third.get()
        if case .failed = outcome { XCTFail("refused by a full log is not a failure: \(outcome)") }
    }

    func testExpiredMessageIsDiscardedWithNoticeWhenTheReceiverComesBack() async throws {
        try await start { $0.inboxTTLSeconds = 1 }
        let bob = try await offlineUser("bob")
        let aliceClient = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))
        let notices = NoticeLog(aliceClient)
        guard case .stored(let id, _) = try await aliceClient.send(text: "too late", to: bob) else { return XCTFail("not stored") }

        try await Task.sleep(nanoseconds: 1_300_000_000) // past the 1 s TTL (a lower bound: load only lengthens it)
        let bobClient = try await relay.connectClient(user: bob)
        let inbox = MessageInbox(bobClient)

        let told = await notices.waitFor {
            if case .discarded(id, bob, .inboxExpired, _) = $0 { return true }
            return false
        }
        XCTAssertTrue(told)
        let emptied = try await Eventually.holds { try await self.inboxLength(bob) == 0 }
        XCTAssertTrue(emptied)
        let stats = try await relay.server.statistics()
        XCTAssertEqual(stats.rejected[.inboxExpired], 1)
        let messages = await inbox.messages
        XCTAssertTrue(messages.isEmpty, "an expired message is not delivered")
    }

    func testRelayRestartBetweenStoreAndDeliveryLosesNothing() async throws {
        try await start()
        let bob = try await offlineUser("bob")
        let aliceClient = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))
        let notices = NoticeLog(aliceClient)
        guard case .stored(let id, _) = try await aliceClient.send(text: "survives restarts", to: bob) else { return XCTFail("not stored") }

        try await relay.restart()

        let bobClient = try await relay.connectClient(user: bob)
        let inbox = MessageInbox(bobClient)
        let arrived = await inbox.waitFor(1)
        XCTAssertTrue(arrived)
        let messages = await inbox.messages
        XCTAssertEqual(messages.map(\.messageId), [id])
        let delivered = await notices.waitFor { $0 == .delivered(messageId: id, to: bob) }
        XCTAssertTrue(delivered, "the sender (reconnected by itself) hears of the delivery")
    }

    func testARetransmittedMessageIsStoredOnce() async throws {
        try await start()
        let store = InboxStore(redis: relay.inspector, maxMessages: 10, ttlSeconds: 60)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let bob = TestRelay.uniqueUser("bob")
        var message = SIMPMessage(kind: .text, messageId: 9, fromUser: "alice", toUser: bob, content: "again")
        let now = WallClock.millisecondsSinceEpoch()
        let first = try await store.store(InboxEntry(message: message, storedAt: now), for: bob, wallNow: now, on: loop).get()
        message.attempt = 2
        let second = try await store.store(InboxEntry(message: message, storedAt: now + 5), for: bob, wallNow: now + 5, on: loop).get()

        XCTAssertEqual(first, InboxStoreResult(duplicate: false))
        XCTAssertEqual(second, InboxStoreResult(duplicate: true))
        let entries = try await store.load(user: bob, device: "", wallNow: now + 5, on: loop).get().entries
        XCTAssertEqual(entries.map(\.message.messageId), [9])
        let ttl = try await relay.inspector.command(["TTL", InboxStore.logKey(bob)]).integer ?? -2
        XCTAssertGreaterThan(ttl, 0, "inbox keys expire")
        try await store.remove(entries[0], for: bob, device: "", on: loop).get()
        let afterRemove = try await store.store(InboxEntry(message: message, storedAt: now + 9), for: bob, wallNow: now + 9, on: loop).get()
        XCTAssertEqual(afterRemove, InboxStoreResult(duplicate: false), "removal forgets the dedupe key too")
    }
}
