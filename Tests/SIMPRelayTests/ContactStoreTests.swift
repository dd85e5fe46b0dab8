import Logging
import NIOCore
import NIOPosix
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// Who shares a conversation with whom, as the Redis store (and the in-memory one) keep it: what
/// a WHO answer says of the asked users, and which key watchers hear of a user's new devices.
final class ContactStoreTests: StoreTestCase {

    private func shares(_ store: any RelayStore, _ user: String, withAsker asker: String) async throws -> Bool? {
        let request = WhoRequest(user: asker, connection: ConnectionID(1), messageId: 1, users: [user], room: nil)
        guard case .who(_, let entries?) = try await store.perform(.who(request), on: loop).get() else { return nil }
        return entries.first?.sharesConversation
    }

    private func newDeviceWatchers(_ store: any RelayStore, of user: String, device: String) async throws -> [String] {
        let publish = KeysPublish(
            user: user, device: device, bundle: Array(device.utf8), oneTimePrekeys: [], connection: ConnectionID(2), messageId: 2)
        guard case .publishKeys(_, _, let change, let watchers) = try await store.perform(.publishKeys(publish), on: loop).get() else {
            XCTFail("no publish answer")
            return []
        }
        XCTAssertEqual(change, .newDevice)
        return watchers
    }

    func testAUserSharesAConversationWithWhomItSentContentOrARoom() async throws {
        for store in try await bothStores() {
            let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob"), carol = TestRelay.uniqueUser("carol")
            let bobSharesWithAlice = try await shares(store, bob, withAsker: alice)
            XCTAssertEqual(bobSharesWithAlice, false, "\(store): strangers")
            _ = try await store.perform(.noteContact(user: alice, peer: bob), on: loop).get()
            let afterAliceWrote = try await shares(store, bob, withAsker: alice)
            XCTAssertEqual(afterAliceWrote, false, "\(store): writing to bob does not show alice his presence")
            _ = try await store.perform(.noteContact(user: bob, peer: alice), on: loop).get()
            let afterBobWrote = try await shares(store, bob, withAsker: alice)
            XCTAssertEqual(afterBobWrote, true, "\(store): bob wrote to alice")

            let room = "room-\(UInt32.random(in: 0 ... .max))"
            for user in [carol, alice] {
                _ = try await store.perform(
                    .room(RoomRequest(operation: .join, room: room, user: user, connection: ConnectionID(3), messageId: 3)), on: loop
                ).get()
            }
            let roomPeers = try await shares(store, carol, withAsker: alice)
            XCTAssertEqual(roomPeers, true, "\(store): members of one room")
        }
    }

    func testOnlyWatchersWhoShareAConversationWithTheUserHearOfItsNewDevices() async throws {
        for store in try await bothStores() {
            let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
            let fetch = KeysFetch(user: bob, skipClaimFor: [], connection: ConnectionID(1), messageId: 1, asker: alice)
            _ = try await store.perform(.fetchKeys(fetch), on: loop).get()
            let first = try await newDeviceWatchers(store, of: bob, device: "phone")
            XCTAssertEqual(first, [alice], "\(store): bob's first keys, which alice's first message waits for")

            _ = try await store.perform(.fetchKeys(fetch), on: loop).get()
            let stranger = try await newDeviceWatchers(store, of: bob, device: "tablet")
            XCTAssertEqual(stranger, [], "\(store): of a second device, fetching bob's keys alone is not enough")

            _ = try await store.perform(.noteContact(user: alice, peer: bob), on: loop).get()
            let contact = try await newDeviceWatchers(store, of: bob, device: "laptop")
            XCTAssertEqual(contact, [alice], "\(store): alice wrote to bob (her device list of his is stale now)")
        }
    }
}
