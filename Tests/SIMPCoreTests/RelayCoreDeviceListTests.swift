import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// The relay and users' signed device lists (docs/PROTOCOL.md §4.8, "Device lists"): kept with a
/// publish, handed out with every fetch, refused (BAD_KEY_BUNDLE) when no client could use one;
/// never trusted.
final class RelayCoreDeviceListTests: XCTestCase {
    private let alice = ConnectionID(1)
    private let bundle = SignedBundles.published(seed: 1)

    private func publish(_ list: [UInt8]) -> SIMPMessage {
        var publish = SIMPMessage(kind: .keysPublish, messageId: 4)
        publish.keyBundles = [bundle]
        publish.deviceList = list
        return publish
    }

    func testAListIsKeptWithThePublishAndHandedOutWithEveryFetch() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        let list = SignedDeviceLists.list(user: "alice", devices: ["phone"], seed: 3)
        var request = KeysPublish(user: "alice", device: "", bundle: bundle, oneTimePrekeys: [], connection: alice, messageId: 4)
        request.deviceList = list
        XCTAssertEqual(relay.control(publish(list), on: alice), [.store(.publishKeys(request))])

        let fetch = KeysFetch(user: "bob", skipClaimFor: [], connection: alice, messageId: 5, asker: "alice")
        let bobList = SignedDeviceLists.list(user: "bob", devices: ["laptop"], seed: 4)
        var answer = SIMPMessage(kind: .keysFetch, messageId: 5, toUser: "bob")
        answer.members = ["laptop"]
        answer.keyBundles = [bundle]
        answer.oneTimePrekeys = [[]]
        answer.deviceList = bobList
        let devices = [DeviceKeys(device: "laptop", bundle: bundle, oneTimePrekey: nil)]
        XCTAssertEqual(relay.answer(.fetchKeys(fetch, devices, known: true, deviceList: bobList)), [.send(alice, answer)])
    }

    func testAListNoClientCouldUseIsRefusedAndNothingIsStored() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        var forged = SignedDeviceLists.list(user: "alice", devices: ["phone"], seed: 3)
        forged[forged.count - 1] ^= 1
        let cases: [(list: [UInt8], problem: String)] = [
            (SignedDeviceLists.list(user: "mallory", devices: ["phone"], seed: 3), "a device list of mallory, not of alice"),
            (forged, "device list: authentication failed (wrong key or altered message)"),
            ([1, 2, 3], "device list: malformed end-to-end data: device list: needs 32 more bytes at offset 1, has 2"),
        ]
        for (list, problem) in cases {
            let actions = relay.control(publish(list), on: alice)
            let text = "key bundle refused: \(problem) (docs/E2E.md §3.4)"
            XCTAssertTrue(actions.contains(.send(alice, .error(.badKeyBundle, text, messageId: 4))), "\(actions)")
            XCTAssertFalse(actions.contains { if case .store = $0 { true } else { false } }, "\(actions)")
        }
    }
}
