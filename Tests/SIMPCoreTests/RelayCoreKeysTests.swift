import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// Key bundles in the relay core (docs/PROTOCOL.md §4.8): published for the session's device,
/// fetched with one-time prekeys the store claims, refused when malformed; never read.
final class RelayCoreKeysTests: XCTestCase {
    private let alice = ConnectionID(1)
    /// A version 1 bundle as published (docs/E2E.md §3.1): 1, keys, zero one-time prekeys.
    private let bundle = SignedBundles.published(seed: 1)
    private let prekey = SignedBundles.prekey(9)

    func testAPublishIsKeptForTheSessionsDeviceAndAnsweredWithThePrekeysLeft() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        var publish = SIMPMessage(kind: .keysPublish, messageId: 4)
        publish.keyBundles = [bundle]
        publish.oneTimePrekeys = [prekey]
        let request = StoreRequest.publishKeys(
            KeysPublish(user: "alice", device: "", bundle: bundle, oneTimePrekeys: [prekey], connection: alice, messageId: 4))
        XCTAssertEqual(relay.control(publish, on: alice), [.store(request)])

        var answer = SIMPMessage(kind: .keysPublish, messageId: 4, toUser: "alice")
        answer.prekeysLeft = 20
        guard case .publishKeys(let keys) = request else { return XCTFail("\(request)") }
        XCTAssertEqual(relay.answer(.publishKeys(keys, prekeysLeft: 20)), [.send(alice, answer)])
        XCTAssertEqual(relay.fail(request, StoreFailure("down")), [.send(alice, .error(.internal, "key bundle not stored, try again", messageId: 4))])
    }

    func testAFetchHandsOutEachDevicesBundleWithItsClaimedPrekeyAndAnUnknownUserIsSaidSo() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        var fetch = SIMPMessage(kind: .keysFetch, messageId: 5, toUser: "bob")
        fetch.members = ["laptop"]
        let request = StoreRequest.fetchKeys(KeysFetch(user: "bob", skipClaimFor: ["laptop"], connection: alice, messageId: 5, asker: "alice"))
        XCTAssertEqual(relay.control(fetch, on: alice), [.store(request)])

        let devices = [
            DeviceKeys(device: "laptop", bundle: bundle, oneTimePrekey: nil), DeviceKeys(device: "phone", bundle: bundle, oneTimePrekey: prekey),
        ]
        var answer = SIMPMessage(kind: .keysFetch, messageId: 5, toUser: "bob")
        answer.members = ["laptop", "phone"]
        answer.keyBundles = [bundle, bundle]
        answer.oneTimePrekeys = [[], prekey]
        guard case .fetchKeys(let fetchRequest) = request else { return XCTFail("\(request)") }
        XCTAssertEqual(relay.answer(.fetchKeys(fetchRequest, devices, known: true)), [.send(alice, answer)])
        XCTAssertEqual(
            relay.answer(.fetchKeys(fetchRequest, [], known: false)), [.send(alice, .error(.unknownRecipient, "no such user: bob", messageId: 5))])
    }

    /// A new or changed bundle is told (KEYS_PUBLISH, messageId 0) to the users who fetched the
    /// user's bundles lately: here at once, elsewhere after a lookup; the same bundle again is not.
    func testANewBundleIsToldToTheUsersWhoFetchedTheUsersBundles() throws {
        var relay = DevRelay()
        let bob = ConnectionID(2)
        try relay.connect("alice", on: alice, port: 5001)
        try relay.connect("bob", on: bob, port: 5002)
        let publish = KeysPublish(user: "bob", device: "", bundle: bundle, oneTimePrekeys: [], connection: bob, messageId: 4)
        var answer = SIMPMessage(kind: .keysPublish, messageId: 4, toUser: "bob")
        answer.prekeysLeft = 3
        var notice = SIMPMessage(kind: .keysPublish, fromUser: "bob", toUser: "alice")
        notice.device = ""
        XCTAssertEqual(
            relay.answer(.publishKeys(publish, prekeysLeft: 3, change: .newDevice, watchers: ["alice", "dave"])),
            [.send(bob, answer), .send(alice, notice), .store(.lookup(user: "dave"))])
        XCTAssertEqual(relay.answer(.publishKeys(publish, prekeysLeft: 3, change: .unchanged, watchers: ["alice"])), [.send(bob, answer)])
    }

    /// A fetch that finds none of an existing user's bundles (the store lost them, or the user
    /// never logged in) asks the user's sessions to publish again (KEYS_FETCH, messageId 0,
    /// device empty); a claim that leaves a device few one-time prekeys asks that device; a user
    /// connected elsewhere is looked up, and a device fetching its own user's bundles asks no one.
    func testAFetchThatFindsNoBundleOrFewPrekeysAsksTheUserToPublishAgain() throws {
        var relay = DevRelay()
        let bob = ConnectionID(2)
        try relay.connect("alice", on: alice, port: 5001)
        try relay.connect("bob", on: bob, port: 5002)
        let fetch = KeysFetch(user: "bob", skipClaimFor: [], connection: alice, messageId: 5, asker: "alice")
        var empty = SIMPMessage(kind: .keysFetch, messageId: 5, toUser: "bob")
        empty.members = []
        var askAll = SIMPMessage(kind: .keysFetch, toUser: "bob")
        askAll.device = ""
        XCTAssertEqual(relay.answer(.fetchKeys(fetch, [], known: true)), [.send(alice, empty), .send(bob, askAll)])

        let low = [DeviceKeys(device: "phone", bundle: bundle, oneTimePrekey: prekey, prekeysLeft: RelayCore.fewPrekeysLeft - 1)]
        var answer = SIMPMessage(kind: .keysFetch, messageId: 5, toUser: "bob")
        answer.members = ["phone"]
        answer.keyBundles = [bundle]
        answer.oneTimePrekeys = [prekey]
        var askPhone = SIMPMessage(kind: .keysFetch, toUser: "bob")
        askPhone.device = "phone"
        askPhone.prekeysLeft = UInt32(RelayCore.fewPrekeysLeft - 1)
        XCTAssertEqual(relay.answer(.fetchKeys(fetch, low, known: true)), [.send(alice, answer), .send(bob, askPhone)])
        let plenty = [DeviceKeys(device: "phone", bundle: bundle, oneTimePrekey: prekey, prekeysLeft: RelayCore.fewPrekeysLeft)]
        XCTAssertEqual(relay.answer(.fetchKeys(fetch, plenty, known: true)), [.send(alice, answer)])

        var forCarol = SIMPMessage(kind: .keysFetch, messageId: 6, toUser: "carol")
        forCarol.members = []
        let carol = KeysFetch(user: "carol", skipClaimFor: [], connection: alice, messageId: 6, asker: "alice")
        XCTAssertEqual(relay.answer(.fetchKeys(carol, [], known: true)), [.send(alice, forCarol), .store(.lookup(user: "carol"))])
        let own = KeysFetch(user: "bob", skipClaimFor: [], connection: bob, messageId: 7, asker: "bob")
        var ownAnswer = SIMPMessage(kind: .keysFetch, messageId: 7, toUser: "bob")
        ownAnswer.members = []
        XCTAssertEqual(relay.answer(.fetchKeys(own, [], known: true)), [.send(bob, ownAnswer)])
    }

    func testMalformedKeyFramesAreRefusedAndNothingIsStored() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        var shortPrekey = SIMPMessage(kind: .keysPublish, messageId: 6)
        shortPrekey.keyBundles = [bundle]
        shortPrekey.oneTimePrekeys = [[1, 2, 3]]
        var twoBundles = shortPrekey
        twoBundles.oneTimePrekeys = []
        twoBundles.keyBundles = [bundle, bundle]
        var huge = twoBundles
        huge.keyBundles = [[UInt8](repeating: 0, count: 4097)]
        // Bundles no client could decode (docs/E2E.md §3.1): the layout without the count (165
        // bytes), one with prekeys in it, another version, a size between the two published ones.
        let undecodable = [Array(bundle.prefix(165)), bundle + prekey, [2] + bundle.dropFirst(), bundle + [0]].map {
            var frame = twoBundles
            frame.keyBundles = [$0]
            return frame
        }
        let roomFetch = SIMPMessage(kind: .keysFetch, messageId: 7, toUser: "#lobby")
        for frame in [shortPrekey, twoBundles, huge, roomFetch] + undecodable {
            let actions = relay.control(frame, on: alice)
            XCTAssertFalse(actions.contains { if case .store = $0 { return true } else { return false } }, "\(frame.kind) stored")
            XCTAssertTrue(actions.contains { if case .send(alice, let reply) = $0 { return reply.errorCode == .badRequest } else { return false } })
        }
    }

    func testTheRelayForwardsTheEndToEndPayloadAsItCameAndAKeysFrameBeforeLoginIsRefused() throws {
        var sealed = SIMPMessage(kind: .text, messageId: 8, fromUser: "alice", toUser: "bob")
        sealed.e2ePayload = [1, 5, 0, 0, 0]
        let decoded = try MessageCodec.decode(MessageCodec.encode(sealed))
        XCTAssertEqual(decoded, sealed)
        XCTAssertEqual(decoded.endToEndPlaintext.count, SIMPMessage().endToEndPlaintext.count, "no content outside the payload")

        var relay = DevRelay()
        _ = relay.open(alice)
        let actions = relay.control(SIMPMessage(kind: .keysFetch, messageId: 9, toUser: "bob"), on: alice)
        XCTAssertTrue(actions.contains { if case .send(alice, let reply) = $0 { return reply.errorCode == .notConnected } else { return false } })
    }
}
