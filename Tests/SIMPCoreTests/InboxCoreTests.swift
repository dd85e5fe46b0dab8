import NIOCore
import SIMPCore
import XCTest

final class InboxEntryTests: XCTestCase {
    func testEntryTextRoundTripsAndNamesTheMessageBySenderAndId() throws {
        var message = SIMPMessage(kind: .text, messageId: 42, fromUser: "alice smith", toUser: "bob", content: "hi there")
        message.stream = 7
        message.seq = 3
        message.floor = 2
        let entry = InboxEntry(message: message, storedAt: 1_700_000_000_000)
        XCTAssertEqual(entry.dedupeKey, "m/42/alice smith")
        let parsed = try XCTUnwrap(InboxEntry(text: entry.text))
        XCTAssertEqual(parsed, entry)
        XCTAssertEqual(parsed.message.seq, 3)
        XCTAssertNil(InboxEntry(text: "garbage"))
        XCTAssertNil(InboxEntry(text: "12 !!!notbase64 m/1/a"))
    }

    func testReceiptAndMessageWithTheSameIdHaveDifferentKeys() {
        let message = SIMPMessage(kind: .text, messageId: 5, fromUser: "a", toUser: "b")
        let receipt = message.receipt(holdMicros: 0)
        XCTAssertNotEqual(
            InboxEntry(message: message, storedAt: 1).dedupeKey,
            InboxEntry(message: SIMPMessage(kind: .receipt, messageId: 5, fromUser: "a"), storedAt: 1).dedupeKey)
        XCTAssertEqual(receipt.kind, .receipt)
    }
}

final class InboxCoreTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(5_000_000_000)
    private let wall: Int64 = 1_700_000_000_000

    private func stored(_ id: UInt64, seq: UInt64, floor: UInt64 = 1, from sender: String = "alice", at storedAt: Int64? = nil) -> InboxEntry {
        var message = SIMPMessage(kind: .text, messageId: id, fromUser: sender, toUser: "bob", content: "m\(id)")
        message.stream = 900
        message.seq = seq
        message.floor = floor
        message.attempt = 4
        return InboxEntry(message: message, storedAt: storedAt ?? wall - 1000)
    }

    private func policy() -> RetransmitPolicy {
        var policy = RetransmitPolicy.oneCopy
        policy.initialRTO = .milliseconds(100)
        policy.maxAttempts = 3
        return policy
    }

    func testAMessageStoredAfterLaterOnesOfItsStreamGoesOutBeforeThem() {
        var inbox = InboxCore(retransmit: policy(), ttlMillis: 60_000)
        // alice's seq 1 was lost on her link and stored after 2 and 3; carol's entries keep their order.
        let entries = [
            stored(12, seq: 2), stored(30, seq: 5, from: "carol"), stored(13, seq: 3),
            stored(31, seq: 4, from: "carol"), stored(11, seq: 1),
        ]
        let output = inbox.loaded(user: "bob", entries: entries, wallNow: wall, now: t0)
        let sent = output.datagrams.map { "\($0.message.fromUser)#\($0.message.seq)" }
        XCTAssertEqual(sent.filter { $0.hasPrefix("alice") }, ["alice#1", "alice#2", "alice#3"])
        XCTAssertEqual(sent.filter { $0.hasPrefix("carol") }, ["carol#4", "carol#5"])
    }

    func testEntriesAfterAHoleInTheInboxCarryAFloorThatSkipsIt() {
        var inbox = InboxCore(retransmit: policy(), ttlMillis: 60_000)
        // seq 1-3 of alice's stream were discarded (cap or TTL); 4 and 5 were stored with floor 1.
        let entries = [stored(13, seq: 4), stored(14, seq: 5)]
        let output = inbox.loaded(user: "bob", entries: entries, wallNow: wall, now: t0)
        XCTAssertEqual(output.datagrams.map(\.message.floor), [4, 4], "the receiver need not wait for 1-3")
        var receipt = output.datagrams[0].message.receipt(holdMicros: 0)
        receipt.fromUser = "bob"
        let delivered = inbox.receipt(receipt, from: "bob", now: t0)?.delivered.map(\.entry)
        XCTAssertEqual(delivered, [entries[0]], "the entry as stored (its text removes it from the store)")
    }

    /// X (seq 4) was stored while only the phone was known; the laptop became
    /// known after it, so X never reaches the laptop, and Y (seq 5, floor 4: alice has not heard
    /// X delivered) must not make the laptop wait for it.
    func testALiveEntryToADeviceThatBecameKnownAfterEarlierEntriesOfItsStreamSkipsThem() {
        var inbox = InboxCore(retransmit: policy(), ttlMillis: 60_000)
        let laptop = Recipient(user: "bob", device: "laptop"), phone = Recipient(user: "bob", device: "phone")
        let x = stored(20, seq: 4, floor: 4), y = stored(21, seq: 5, floor: 4)
        inbox.deviceConnected(laptop)
        XCTAssertTrue(inbox.loaded(user: laptop, entries: [], earlier: [x], wallNow: wall, now: t0).datagrams.isEmpty)
        XCTAssertEqual(inbox.enqueue(y, for: laptop, now: t0).datagrams.map(\.message.floor), [5], "seq 4 never comes to the laptop")

        inbox.deviceConnected(phone) // a device X is meant for still waits for it
        _ = inbox.loaded(user: phone, entries: [], wallNow: wall, now: t0)
        XCTAssertEqual(inbox.enqueue(y, for: phone, now: t0).datagrams.map(\.message.floor), [4])
    }

    func testALiveEntrysFloorSkipsOnlyTheSeqsStoredBeforeTheDeviceBecameKnown() {
        var inbox = InboxCore(retransmit: policy(), ttlMillis: 60_000)
        let laptop = Recipient(user: "bob", device: "laptop")
        // seq 4 before the laptop became known; 6 stored for it since (in its backlog); 8 arrives live.
        let loaded = inbox.loaded(
            user: laptop, entries: [stored(22, seq: 6, floor: 4)], earlier: [stored(20, seq: 4, floor: 4)], wallNow: wall, now: t0)
        XCTAssertEqual(loaded.datagrams.map(\.message.floor), [6])
        XCTAssertEqual(
            inbox.enqueue(stored(24, seq: 8, floor: 4), for: laptop, now: t0).datagrams.map(\.message.floor), [5],
            "past seq 4 only: 5 may yet be stored for the laptop, and 6 is on its way to it")
    }

    func testStoredMessagesGoOutInOrderWithTheirOriginalSequence() {
        var inbox = InboxCore(retransmit: policy(), ttlMillis: 60_000)
        let output = inbox.loaded(user: "bob", entries: [stored(10, seq: 1), stored(11, seq: 2)], wallNow: wall, now: t0)
        XCTAssertEqual(output.datagrams.map(\.user), ["bob", "bob"])
        XCTAssertEqual(output.datagrams.map(\.message.messageId), [10, 11])
        XCTAssertEqual(output.datagrams.map(\.message.stream), [900, 900])
        XCTAssertEqual(output.datagrams.map(\.message.seq), [1, 2])
        XCTAssertEqual(output.datagrams.map(\.message.floor), [1, 1])
        XCTAssertEqual(output.datagrams.map(\.message.attempt), [1, 1], "the relay's own transmission count")
        XCTAssertEqual(output.datagrams.map(\.message.fromUser), ["alice", "alice"])
        XCTAssertEqual(inbox.inFlightCount, 2)
    }

    func testReceiptDeliversTheEntryOnceAndUnrelatedReceiptsAreNotTaken() throws {
        var inbox = InboxCore(retransmit: policy(), ttlMillis: 60_000)
        let entry = stored(10, seq: 1)
        let sent = inbox.loaded(user: "bob", entries: [entry], wallNow: wall, now: t0).datagrams[0].message
        var receipt = sent.receipt(holdMicros: 0)
        receipt.fromUser = "bob"

        XCTAssertNil(inbox.receipt(SIMPMessage(kind: .receipt, messageId: 99, fromUser: "bob", toUser: "alice"), from: "bob", now: t0))
        let output = try XCTUnwrap(inbox.receipt(receipt, from: "bob", now: t0 + .milliseconds(5)))
        XCTAssertEqual(output.delivered.map(\.entry), [entry])
        XCTAssertEqual(output.delivered.map(\.receiver), ["bob"])
        XCTAssertNil(inbox.receipt(receipt, from: "bob", now: t0 + .milliseconds(6)), "a second receipt is not the inbox's")
        XCTAssertEqual(inbox.inFlightCount, 0)
        XCTAssertNil(inbox.nextDeadline)
    }

    func testUnreceiptedMessageIsRetransmittedWithTheSameSequenceThenLeftForTheNextConnection() {
        var inbox = InboxCore(retransmit: policy(), ttlMillis: 60_000)
        _ = inbox.loaded(user: "bob", entries: [stored(10, seq: 1)], wallNow: wall, now: t0)
        var now = t0
        var transmissions: [SIMPMessage] = []
        while let deadline = inbox.nextDeadline {
            now = deadline
            transmissions += inbox.poll(now: now).datagrams.map(\.message)
        }
        XCTAssertEqual(transmissions.map(\.attempt), [2, 3])
        XCTAssertEqual(transmissions.map(\.seq), [1, 1])
        XCTAssertEqual(inbox.inFlightCount, 0, "given up for now; the entry stays stored")
    }

    func testExpiredEntriesAreReportedAndReceiptsHandedOver() {
        var inbox = InboxCore(retransmit: policy(), ttlMillis: 60_000)
        let old = stored(10, seq: 1, at: wall - 61_000)
        let receipt = InboxEntry(message: SIMPMessage(kind: .receipt, messageId: 3, fromUser: "carol", toUser: "bob"), storedAt: wall)
        let output = inbox.loaded(user: "bob", entries: [old, receipt, stored(11, seq: 2)], wallNow: wall, now: t0)
        XCTAssertEqual(output.expired.map(\.entry), [old])
        XCTAssertEqual(output.receipts.map(\.entry), [receipt])
        XCTAssertEqual(output.datagrams.map(\.message.messageId), [11])
    }

    func testLeavingStopsDeliveryAndReloadingStartsOver() {
        var inbox = InboxCore(retransmit: policy(), ttlMillis: 60_000)
        _ = inbox.loaded(user: "bob", entries: [stored(10, seq: 1)], wallNow: wall, now: t0)
        inbox.userLeft("bob")
        XCTAssertEqual(inbox.inFlightCount, 0)
        let again = inbox.loaded(user: "bob", entries: [stored(10, seq: 1), stored(10, seq: 1)], wallNow: wall, now: t0)
        XCTAssertEqual(again.datagrams.count, 1, "an entry stored twice goes out once")
    }
}

final class ClientSessionInboxTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(5_000_000_000)

    func testStoredReceiptSettlesTheMessageAndLaterDeliveryIsANotice() {
        var session = ClientSession(configuration: .init(user: "alice", firstMessageId: 100))
        _ = session.registered(keys: SessionKeys(sessionId: 1, secret: Array(repeating: 1, count: 32)), now: t0)
        let (id, _) = session.submit(SIMPMessage(kind: .text, toUser: "bob", content: "hi"), now: t0)
        var stored = SIMPMessage(kind: .receipt, messageId: id, fromUser: "bob", toUser: "alice")
        stored.status = .stored
        let first = session.controlReceived(stored, now: t0 + .milliseconds(2))
        XCTAssertEqual(first.notices, [.stored(messageId: id, to: "bob")])
        XCTAssertTrue(first.outcomes.isEmpty, "stored is not delivered")
        XCTAssertFalse(session.sender.isPending(id), "no more retransmissions")

        var later = stored
        later.status = .deliveredFromInbox
        XCTAssertEqual(session.controlReceived(later, now: t0 + .seconds(5)).notices, [.delivered(messageId: id, to: "bob")])
        var plain = stored
        plain.status = .delivered
        XCTAssertTrue(session.controlReceived(plain, now: t0 + .seconds(6)).notices.isEmpty, "a late duplicate receipt is no news")
        let discarded = session.controlReceived(
            {
                var e = SIMPMessage.error(.inboxExpired, "gone", messageId: id, to: "alice"); e.fromUser = "bob"; return e
            }(),
            now: t0 + .seconds(7))
        XCTAssertEqual(discarded.notices, [.discarded(messageId: id, to: "bob", .inboxExpired, "gone")])
    }

    func testDatagramCodecCarriesTheStatus() throws {
        var receipt = SIMPMessage(kind: .receipt, messageId: 1, fromUser: "b", toUser: "a")
        receipt.status = .deliveredFromInbox
        XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(receipt)).status, .deliveredFromInbox)
    }
}
