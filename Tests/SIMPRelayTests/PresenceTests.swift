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
        let aliceName = TestRelay.uniqueUser("alice")
        let alice = try await relay.connectClient(user: aliceName)
        let aliceEvents = PeerEventLog(alice)
        let bobName = TestRelay.uniqueUser("bob")
        let never = TestRelay.uniqueUser("never"), nobody = TestRelay.uniqueUser("nobody")
        try await relay.addUser(never)
        var bob = try await relay.connectClient(user: bobName)

        // A stranger is told nothing: bob online, a user never seen and no user look alike.
        let strangers = try await alice.who([bobName, never, nobody])
        XCTAssertEqual(strangers, [bobName, never, nobody].map { PresenceEntry(user: $0, online: false, lastSeen: -1) })

        // bob writes to alice: she shares a conversation with him now, and sees him.
        _ = try await bob.send(text: "hi", to: aliceName)
        let shown = try await Eventually.holds { try await alice.who([bobName]).first?.online == true }
        XCTAssertTrue(shown, "bob wrote to alice: she sees him online")
        let noted = try await relay.inspector.command(["ZSCORE", ContactStore.key(bobName), aliceName]).string
        XCTAssertNotNil(noted, "the relay noted that bob wrote to alice")
        let reverse = try await relay.inspector.command(["ZSCORE", ContactStore.key(aliceName), bobName]).string
        XCTAssertNil(reverse, "alice never wrote to bob")
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
        XCTAssertEqual((later.first?.lastSeen ?? 1) % RelayCore.lastSeenGranularity, 0, "to the minute")

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

    func testPresenceOffHidesAUserFromItsContactsAndRoomPeersToo() async throws {
        let aliceName = TestRelay.uniqueUser("alice"), carolName = TestRelay.uniqueUser("carol")
        let alice = try await relay.connectClient(user: aliceName)
        var carol = try await relay.connectClient(user: carolName) { $0.hidePresence = true }
        let room = "room-\(UInt32.random(in: .min ... .max))"
        _ = try await carol.joinRoom(room)
        _ = try await alice.joinRoom(room)
        _ = try await carol.send(text: "hi", to: aliceName)
        let off = try await relay.inspector.command(["EXISTS", PresenceStore.offKey(carolName)]).integer
        XCTAssertEqual(off, 1)

        let direct = try await alice.who([carolName])
        XCTAssertEqual(direct, [PresenceEntry(user: carolName, online: false, lastSeen: -1)], "a contact sees nothing")
        let roomPresence = try await alice.who(room: room)
        XCTAssertEqual(roomPresence.first { $0.user == carolName }, PresenceEntry(user: carolName, online: false, lastSeen: -1))
        XCTAssertEqual(roomPresence.first { $0.user == aliceName }?.online, true, "the other members are shown")

        // Her next login with presence on shows her again.
        await carol.close()
        carol = try await relay.connectClient(user: carolName)
        let shown = try await Eventually.holds { try await alice.who([carolName]).first?.online == true }
        XCTAssertTrue(shown)
        await carol.close()
    }

    func testARoomsMembersAreRefusedToANonMemberAlikeWhetherTheRoomExistsOrNot() async throws {
        let alice = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))
        let bob = try await relay.connectClient(user: TestRelay.uniqueUser("bob"))
        let room = "room-\(UInt32.random(in: .min ... .max))", missing = "room-\(UInt32.random(in: .min ... .max))"
        _ = try await bob.joinRoom(room)
        var refusals: [String] = []
        for name in [room, missing] {
            do {
                _ = try await alice.roomMembers(name)
                XCTFail("a non-member listed #\(name)")
            } catch SIMPClientError.rejected(let code, let text) {
                XCTAssertEqual(code, .notAMember)
                refusals.append(text.replacingOccurrences(of: name, with: "ROOM"))
            }
        }
        XCTAssertEqual(refusals.count, 2)
        XCTAssertEqual(refusals.first, refusals.last, "no room-existence oracle")
        let members = try await bob.roomMembers(room)
        XCTAssertEqual(members, [bob.configuration.user])
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
