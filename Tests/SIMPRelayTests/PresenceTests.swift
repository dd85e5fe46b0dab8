import NIOCore
import SIMPClient
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// Collects a client's `PeerEvent`s.
actor PeerEventLog {
    private(set) var events: [PeerEvent] = []

    init(_ client: SIMPClient) {
        Task { [weak self] in
            for await event in client.peerEvents { await self?.append(event) }
        }
    }

    private func append(_ event: PeerEvent) { events.append(event) }

    func waitFor(within timeout: TimeAmount = Eventually.generousBound, _ predicate: @Sendable @escaping (PeerEvent) -> Bool) async -> Bool {
        await Eventually.holds(within: timeout) { self.events.contains(where: predicate) }
    }
}

/// Presence, read markers and typing against a real Redis and a real relay.
final class PresenceTests: RelayTestCase {
    private static func presence(_ event: PeerEvent, _ user: String, online: Bool) -> Bool {
        if case .presence(user, online, let lastSeen) = event { return lastSeen > 0 }
        return false
    }

    func testPresenceChangesReachFollowersAndRoomMembers() async throws {
        let alice = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))
        let aliceEvents = PeerEventLog(alice)
        let bobName = TestRelay.uniqueUser("bob")
        let never = TestRelay.uniqueUser("never"), nobody = TestRelay.uniqueUser("nobody")
        try await relay.addUser(never)
        var bob = try await relay.connectClient(user: bobName)

        let answer = try await alice.who([bobName, never, nobody])
        XCTAssertEqual(answer.map(\.user), [bobName, never, nobody])
        XCTAssertEqual(answer.map(\.online), [true, false, false])
        XCTAssertEqual(answer[1].lastSeen, 0, "a user who exists but was never seen")
        XCTAssertEqual(answer[2].lastSeen, -1, "no such user: no credentials, never seen")
        let key = try await relay.inspector.command(["HGET", "simp:presence:{\(bobName)}", "state"]).string
        XCTAssertEqual(key, "online")
        let ttl = try await relay.inspector.command(["TTL", "simp:presence:{\(bobName)}"]).integer ?? -2
        XCTAssertGreaterThan(ttl, 0, "online presence expires unless refreshed")

        await bob.close()
        let wentOffline = await aliceEvents.waitFor { Self.presence($0, bobName, online: false) }
        XCTAssertTrue(wentOffline, "a follower hears that bob went offline")
        let later = try await alice.who([bobName])
        XCTAssertEqual(later.first?.online, false)
        XCTAssertGreaterThan(later.first?.lastSeen ?? 0, 0, "last seen")

        bob = try await relay.connectClient(user: bobName)
        let cameBack = await aliceEvents.waitFor { Self.presence($0, bobName, online: true) }
        XCTAssertTrue(cameBack)

        // Room members hear of each other without asking.
        let room = "room-\(UInt32.random(in: .min ... .max))"
        let carol = try await relay.connectClient(user: TestRelay.uniqueUser("carol"))
        let carolEvents = PeerEventLog(carol)
        _ = try await carol.joinRoom(room)
        _ = try await bob.joinRoom(room)
        let roomPresence = try await carol.who(room: room)
        XCTAssertEqual(Set(roomPresence.map(\.user)), [carol.configuration.user, bobName])
        await bob.close()
        let heard = await carolEvents.waitFor { Self.presence($0, bobName, online: false) }
        XCTAssertTrue(heard, "a room member hears that bob went offline")
        do {
            _ = try await alice.who(room: room)
            XCTFail("a non-member asked for a room's presence")
        } catch SIMPClientError.rejected(let code, _) {
            XCTAssertEqual(code, .notAMember)
        }
    }

    func testReadMarkersReachTheSenderEvenAfterItWasOffline() async throws {
        let aliceName = TestRelay.uniqueUser("alice")
        let alice = try await relay.connectClient(user: aliceName)
        let aliceNotices = NoticeLog(alice)
        let bob = try await relay.connectClient(user: TestRelay.uniqueUser("bob"))
        let inbox = MessageInbox(bob)
        guard case .delivered(let first, _, _) = try await alice.send(text: "one", to: bob.configuration.user),
            case .delivered(let second, _, _) = try await alice.send(text: "two", to: bob.configuration.user)
        else {
            return XCTFail("not delivered")
        }
        _ = await inbox.waitFor(2)

        await bob.markRead(from: aliceName, upTo: first)
        let read = await aliceNotices.waitFor { $0 == .read(upTo: first, by: bob.configuration.user) }
        XCTAssertTrue(read, "the sender hears that bob read up to the first message")

        await alice.close()
        await bob.markRead(from: aliceName, upTo: second)
        let stored = try await Eventually.holds {
            try await self.relay.inspector.pendingEntries(aliceName).count == 1
        }
        XCTAssertTrue(stored, "the read marker waits for the offline sender")
        let aliceAgain = try await relay.connectClient(user: aliceName)
        let againNotices = NoticeLog(aliceAgain)
        let readLater = await againNotices.waitFor { $0 == .read(upTo: second, by: bob.configuration.user) }
        XCTAssertTrue(readLater)
    }

    func testTypingIsDeliveredAtMostOnceAndNeverStored() async throws {
        let alice = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))
        let bobName = TestRelay.uniqueUser("bob")
        let bob = try await relay.connectClient(user: bobName)
        let bobEvents = PeerEventLog(bob)

        await alice.sendTyping(to: bobName)
        let typing = await bobEvents.waitFor { $0 == .typing(from: alice.configuration.user) }
        XCTAssertTrue(typing)

        await bob.close()
        _ = try await Eventually.holds { try await self.relay.inspector.command(["EXISTS", "simp:user:{\(bobName)}"]).integer == 0 }
        await alice.sendTyping(to: bobName)
        let neverStored = try await Eventually.stays { // quiet period: a stored copy would show
            try await self.relay.inspector.command(["EXISTS", InboxStore.logKey(bobName)]).integer == 0
        }
        XCTAssertTrue(neverStored)
        let stored = try await relay.inspector.command(["EXISTS", InboxStore.logKey(bobName)]).integer
        XCTAssertEqual(stored, 0, "typing is never stored")
        let stats = try await alice.statistics()
        XCTAssertEqual(stats.retransmits, 0, "typing is never retransmitted")
        XCTAssertEqual(stats.inFlight, 0)
    }
}
