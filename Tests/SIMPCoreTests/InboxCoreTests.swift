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
        XCTAssertNotEqual(InboxEntry(message: message, storedAt: 1).dedupeKey,
                          InboxEntry(message: SIMPMessage(kind: .receipt, messageId: 5, fromUser: "a"), storedAt: 1).dedupeKey)
        XCTAssertEqual(receipt.kind, .receipt)
    }
}

final class InboxCoreTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(5_000_000_000)
    private let wall: Int64 = 1_700_000_000_000

    private func stored(_ id: UInt64, seq: UInt64, from sender: String = "alice", at storedAt: Int64? = nil) -> InboxEntry {
        var message = SIMPMessage(kind: .text, messageId: id, fromUser: sender, toUser: "bob", content: "m\(id)")
        message.stream = 900
        message.seq = seq
        message.floor = 1
        message.attempt = 4
        return InboxEntry(message: message, storedAt: storedAt ?? wall - 1000)
    }

    private func policy() -> RetransmitPolicy {
        var policy = RetransmitPolicy.oneCopy
        policy.initialRTO = .milliseconds(100)
        policy.maxAttempts = 3
        return policy
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

final class RelayCoreInboxTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(5_000_000_000)

    func testStoredReceiptThenDeliveryFromInboxThenDeliveredReceipt() throws {
        var relay = DevRelay()
        let alice = ConnectionID(1), bob = ConnectionID(2)
        relay.connect("alice", on: alice, port: 5001, now: t0)
        var message = SIMPMessage(kind: .text, messageId: 77, fromUser: "alice", toUser: "bob", content: "hi")
        message.stream = 5
        message.seq = 1
        let entry = InboxEntry(message: message, storedAt: 1000)

        let storedActions = relay.core.inboxStoreCompleted(user: "bob", entry: entry, result: .stored(duplicate: false, discarded: []), now: t0)
        guard case .send(alice, let storedReceipt) = storedActions.first else { return XCTFail("\(storedActions)") }
        XCTAssertEqual(storedReceipt.status, .stored)
        XCTAssertEqual(storedReceipt.messageId, 77)
        XCTAssertEqual(storedReceipt.fromUser, "bob")

        let onConnect = relay.connect("bob", on: bob, port: 5002, now: t0)
        XCTAssertTrue(onConnect.contains { if case .loadInbox("bob") = $0 { return true }; return false })
        let delivery = relay.core.inboxLoaded(user: "bob", entries: [entry], wallNow: 2000, now: t0)
        guard case .deliver("bob", _, let address) = delivery.first else { return XCTFail("\(delivery)") }
        XCTAssertEqual(address.port, 5002)
        let sent = try XCTUnwrap(relay.delivered(to: "bob", in: delivery).first, "sealed for bob")
        XCTAssertEqual(sent.seq, 1)

        let receipted = relay.core.controlReceived(sent.receipt(holdMicros: 0), on: bob, peer: try SocketAddress(ipAddress: "127.0.0.1", port: 1), now: t0)
        guard case .removeFromInbox("bob", entry) = receipted.first else { return XCTFail("\(receipted)") }
        guard case .send(alice, let delivered) = receipted.last else { return XCTFail("\(receipted)") }
        XCTAssertEqual(delivered.status, .deliveredFromInbox)
        XCTAssertEqual(delivered.messageId, 77)
    }

    func testDeliveredReceiptForAnOfflineSenderIsStoredForIt() throws {
        var relay = DevRelay()
        let bob = ConnectionID(2)
        relay.connect("bob", on: bob, port: 5002, now: t0)
        let entry = InboxEntry(message: SIMPMessage(kind: .text, messageId: 8, fromUser: "alice", toUser: "bob"), storedAt: 1000)
        let sent = relay.core.inboxLoaded(user: "bob", entries: [entry], wallNow: 2000, now: t0)
        let message = try XCTUnwrap(relay.delivered(to: "bob", in: sent).first)
        let actions = relay.core.controlReceived(message.receipt(holdMicros: 0), on: bob, peer: try SocketAddress(ipAddress: "127.0.0.1", port: 1), now: t0)
        guard case .storeInInbox("alice", let receipt) = actions.last else { return XCTFail("\(actions)") }
        XCTAssertEqual(receipt.kind, .receipt)
        XCTAssertEqual(receipt.status, .deliveredFromInbox)
    }

    func testDiscardedEntriesAreCountedAndTheirSendersTold() {
        var relay = DevRelay()
        let alice = ConnectionID(1)
        relay.connect("alice", on: alice, port: 5001, now: t0)
        let old = InboxEntry(message: SIMPMessage(kind: .text, messageId: 1, fromUser: "alice", toUser: "bob"), storedAt: 1)
        let new = InboxEntry(message: SIMPMessage(kind: .text, messageId: 2, fromUser: "alice", toUser: "bob"), storedAt: 2)
        let actions = relay.core.inboxStoreCompleted(user: "bob", entry: new, result: .stored(duplicate: false, discarded: [(old, .full)]), now: t0)
        guard case .reject(.inboxFull, _) = actions[0] else { return XCTFail("\(actions)") }
        guard case .send(alice, let error) = actions[1] else { return XCTFail("\(actions)") }
        XCTAssertEqual(error.errorCode, .inboxFull)
        XCTAssertEqual(error.messageId, 1)
        guard case .send(alice, let receipt) = actions[2] else { return XCTFail("\(actions)") }
        XCTAssertEqual(receipt.status, .stored)
        XCTAssertEqual(receipt.messageId, 2)
        guard case .reject(.inboxUnavailable, _) = relay.core.inboxStoreCompleted(user: "bob", entry: new, result: .failed, now: t0).first else {
            return XCTFail("a failed store is counted")
        }
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
            { var e = SIMPMessage.error(.inboxExpired, "gone", messageId: id, to: "alice"); e.fromUser = "bob"; return e }(),
            now: t0 + .seconds(7))
        XCTAssertEqual(discarded.notices, [.discarded(messageId: id, to: "bob", .inboxExpired, "gone")])
    }

    func testDatagramCodecCarriesTheStatus() throws {
        var receipt = SIMPMessage(kind: .receipt, messageId: 1, fromUser: "b", toUser: "a")
        receipt.status = .deliveredFromInbox
        XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(receipt)).status, .deliveredFromInbox)
    }
}

final class RelayCoreRoomTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(5_000_000_000)

    func testAPostBecomesOneNumberedCopyPerOtherMemberAndTheAuthorHearsStored() {
        var relay = DevRelay()
        let alice = ConnectionID(1)
        relay.connect("alice", on: alice, port: 5001, now: t0)
        var post = SIMPMessage(kind: .text, messageId: 900, fromUser: "alice", toUser: "#lobby", content: "hi all")
        post.stream = 900
        post.seq = 4

        let routed = relay.send(post, now: t0)
        guard case .postToRoom("lobby", let decoded) = routed.first else { return XCTFail("\(routed)") }
        var core = relay.core
        let actions = core.roomPosted(room: "lobby", message: decoded, result: .posted(seq: 17, members: ["carol", "alice", "bob"], duplicate: false))

        guard case .send(alice, let receipt) = actions.first else { return XCTFail("\(actions)") }
        XCTAssertEqual(receipt.status, .stored)
        XCTAssertEqual(receipt.memberCount, 2)
        XCTAssertEqual(receipt.messageId, 900)
        let copies = actions.compactMap { action -> (String, SIMPMessage)? in
            if case .storeInInbox(let user, let copy) = action { return (user, copy) }
            return nil
        }
        XCTAssertEqual(copies.map(\.0), ["bob", "carol"])
        for (member, copy) in copies {
            XCTAssertEqual(copy.fromUser, "#lobby")
            XCTAssertEqual(copy.toUser, member)
            XCTAssertEqual(copy.author, "alice")
            XCTAssertEqual(copy.authorMessageId, 900)
            XCTAssertEqual([copy.messageId, copy.seq, copy.stream, copy.floor], [17, 17, RelayCore.roomStream, 0])
        }
        let again = core.roomPosted(room: "lobby", message: decoded, result: .posted(seq: 17, members: ["alice", "bob"], duplicate: true))
        XCTAssertEqual(again.count, 1, "a retransmitted post is receipted again, not fanned out again")
        let refused = core.roomPosted(room: "lobby", message: decoded, result: .notAMember)
        guard case .send(alice, let error) = refused.last else { return XCTFail("\(refused)") }
        XCTAssertEqual(error.errorCode, .notAMember)
        XCTAssertFalse(RelayCore.isValidRoomName("has space"))
        XCTAssertFalse(RelayCore.isValidRoomName(""))
        XCTAssertTrue(RelayCore.isValidRoomName("team-1.dev_x"))
    }

    func testRelayedCopiesWithoutAFloorGetTheLowestPendingSeq() {
        var sender = ReliableSender(firstMessageId: 1, keepsSenderSequence: true)
        func copy(_ seq: UInt64) -> SIMPMessage {
            var message = SIMPMessage(kind: .text, messageId: seq, fromUser: "#lobby", toUser: "bob")
            message.stream = 1
            message.seq = seq
            return message
        }
        let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
        XCTAssertEqual(sender.submit(copy(5), now: t0).output.transmit.map(\.floor), [5])
        XCTAssertEqual(sender.submit(copy(8), now: t0).output.transmit.map(\.floor), [5], "5 is still pending")
        var receipt = copy(5).receipt(holdMicros: 0)
        receipt.attempt = 1
        _ = sender.handleReceipt(receipt, now: t0 + .milliseconds(1))
        XCTAssertEqual(sender.submit(copy(9), now: t0 + .milliseconds(2)).output.transmit.map(\.floor), [8])
    }

    func testRoomFieldsRoundTrip() throws {
        var reply = SIMPMessage(kind: .roomMembers, messageId: 3, toUser: "alice")
        reply.room = "lobby"
        reply.members = ["alice", "bob", "日本"]
        reply.author = "x"
        reply.authorMessageId = 7
        reply.memberCount = 3
        reply.deliveredCount = 2
        XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(reply)), reply)
        XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(SIMPMessage(kind: .roomJoin))).members, [])
    }
}

final class RelayCorePresenceTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(5_000_000_000)

    private func connect(_ relay: inout DevRelay, _ user: String, _ id: UInt64) -> ConnectionID {
        let connection = ConnectionID(id)
        relay.connect(user, on: connection, port: Int(5000 + id), now: t0)
        return connection
    }

    func testPresenceGoesToFollowersAndRoomPeersConnectedHere() {
        var relay = DevRelay()
        let alice = connect(&relay, "alice", 1), carol = connect(&relay, "carol", 2)
        let bobConnection = connect(&relay, "bob", 3)
        var core = relay.core
        let closed = core.connectionClosed(bobConnection)
        XCTAssertTrue(closed.contains { if case .recordPresence("bob", false) = $0 { return true }; return false })

        _ = core.whoAnswered(WhoRequest(user: "alice", connection: alice, messageId: 9, users: ["bob"], room: nil),
                             [PresenceEntry(user: "bob", online: false, lastSeen: 5)])
        let actions = core.presenceRecorded(user: "bob", online: true, lastSeen: 77, roomPeers: ["bob", "carol", "dave"])
        let sent = actions.compactMap { action -> (ConnectionID, SIMPMessage)? in
            if case .send(let connection, let message) = action { return (connection, message) }
            return nil
        }
        XCTAssertEqual(sent.map(\.0), [alice, carol], "follower alice and room peer carol; dave is not here")
        XCTAssertEqual(sent.map(\.1.kind), [.presence, .presence])
        XCTAssertEqual(sent.first?.1.online, true)
        XCTAssertEqual(sent.first?.1.lastSeen, 77)
        XCTAssertEqual(sent.first?.1.fromUser, "bob")
    }

    func testReadMarkerForAnOfflineSenderIsStoredAndTypingForAnOfflineUserIsDropped() {
        var relay = DevRelay()
        let bob = connect(&relay, "bob", 1)
        let read = relay.core.controlReceived(SIMPMessage(kind: .read, messageId: 12, fromUser: "mallory", toUser: "alice"),
                                        on: bob, peer: try! SocketAddress(ipAddress: "127.0.0.1", port: 1), now: t0)
        guard case .storeInInbox("alice", let marker) = read.first else { return XCTFail("\(read)") }
        XCTAssertEqual(marker.fromUser, "bob", "the relay vouches for the reader")
        XCTAssertEqual(InboxEntry(message: marker, storedAt: 1).dedupeKey, "d/12/bob")

        _ = relay.send(SIMPMessage(kind: .typing, messageId: 1, fromUser: "bob", toUser: "alice"), now: t0)
        XCTAssertTrue(relay.core.lookupCompleted(user: "alice", route: nil, known: true, now: t0).isEmpty, "not stored, not refused")
        XCTAssertTrue(relay.send(SIMPMessage(kind: .typing, messageId: 2, fromUser: "bob", toUser: "#room"), now: t0).isEmpty)
    }

    func testPresenceEntryTextRoundTripsUserIdsWithSpaces() {
        let entry = PresenceEntry(user: "ann marie", online: true, lastSeen: 123)
        XCTAssertEqual(PresenceEntry(text: entry.text), entry)
        XCTAssertNil(PresenceEntry(text: "bob maybe 1"))
    }
}

final class InboxOrderingTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(5_000_000_000)

    func testDirectDatagramsWaitUntilStoredOnesFromTheSameSenderAreReceipted() throws {
        var relay = DevRelay()
        let bob = ConnectionID(2)
        relay.connect("alice", on: ConnectionID(1), port: 5001, now: t0)
        relay.connect("bob", on: bob, port: 5002, now: t0)
        relay.connect("carol", on: ConnectionID(3), port: 5003, now: t0)
        var stored = SIMPMessage(kind: .text, messageId: 10, fromUser: "alice", toUser: "bob")
        stored.stream = 10
        stored.seq = 1
        let sent = relay.core.inboxLoaded(user: "bob", entries: [InboxEntry(message: stored, storedAt: 1)], wallNow: 2, now: t0)
        let copy = try XCTUnwrap(relay.delivered(to: "bob", in: sent).first)

        var direct = SIMPMessage(kind: .text, messageId: 11, fromUser: "alice", toUser: "bob")
        direct.stream = 10
        direct.seq = 2
        direct.floor = 2
        XCTAssertTrue(relay.send(direct, now: t0).isEmpty, "held behind the stored message")
        XCTAssertTrue(relay.send(direct, now: t0).isEmpty, "a retransmission is held once")
        let fromCarol = relay.send(SIMPMessage(kind: .text, messageId: 5, fromUser: "carol", toUser: "bob"), now: t0)
        guard case .deliver = fromCarol.first else { return XCTFail("other senders are not held") }

        let receipted = relay.core.controlReceived(copy.receipt(holdMicros: 0), on: bob, peer: try SocketAddress(ipAddress: "127.0.0.1", port: 1), now: t0)
        XCTAssertEqual(try relay.delivered(to: "bob", in: receipted), [direct], "released once the stored message is receipted")
        guard case .deliver = relay.send(direct, now: t0).first else { return XCTFail("no longer held") }
    }
}
