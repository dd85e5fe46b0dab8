import SIMPE2E
import XCTest

/// `E2EMessenger`: several devices per user, one envelope per message (docs/E2E.md §11).
final class MessengerTests: XCTestCase {
    private var random = SeededRandom(seed: 11)

    private func device(_ name: String, store: MemoryStateStore = MemoryStateStore()) throws -> E2EMessenger {
        try E2EMessenger(device: name, store: store, using: &random)
    }

    /// The bundle a relay hands out for `device`: its fixed part with one fresh one-time prekey.
    private func bundle(_ device: inout E2EMessenger) throws -> KeyBundle {
        let prekeys = try device.publishPrekeys(1, using: &random)
        return device.local.prekeys.bundle(identity: device.local.identity, oneTimePrekeys: prekeys)
    }

    func testOneEnvelopeOpensOnEachDeviceItWasSealedForAndNotOnAnother() throws {
        var alice = try device("desk")
        var (laptop, phone, tablet) = (try device("laptop"), try device("phone"), try device("tablet"))
        let notices = try alice.updateDevices(of: "bob", bundles: [("laptop", try bundle(&laptop)), ("phone", try bundle(&phone))], using: &random)
        XCTAssertEqual(notices, [], "first contact: nothing to tell")

        let envelope = try alice.seal(Array("hello both".utf8), to: "bob")
        XCTAssertEqual(try E2EEnvelope(encoded: envelope).copies.map(\.device), ["laptop", "phone"])
        XCTAssertEqual(try laptop.open(envelope, from: "alice", now: 0, using: &random).plaintext, Array("hello both".utf8))
        XCTAssertEqual(try phone.open(envelope, from: "alice", now: 0, using: &random).plaintext, Array("hello both".utf8))
        XCTAssertThrowsError(try tablet.open(envelope, from: "alice", now: 0, using: &random)) { error in
            guard case E2EError.noSession = error else { return XCTFail("\(error)") }
        }
        // The same envelope again (a retransmission) is a duplicate, not a second message.
        XCTAssertThrowsError(try laptop.open(envelope, from: "alice", now: 0, using: &random)) { XCTAssertEqual($0 as? E2EError, .duplicate) }

        // bob's laptop answers without fetching anything: alice's desk became known from the message.
        XCTAssertEqual(try laptop.devices(of: "alice").map(\.device), ["desk"])
        let reply = try laptop.seal(Array("hi".utf8), to: "alice")
        XCTAssertEqual(try alice.open(reply, from: "bob", now: 0, using: &random).plaintext, Array("hi".utf8))
    }

    func testANewDeviceAndAChangedKeyAreToldOnTheNextFetch() throws {
        var alice = try device("desk")
        var laptop = try device("laptop")
        let laptopBundle = try bundle(&laptop)
        _ = try alice.updateDevices(of: "bob", bundles: [("laptop", laptopBundle)], using: &random)
        var phone = try device("phone")
        var reinstalled = try device("laptop") // a new identity under the same name
        let notices = try alice.updateDevices(
            of: "bob", bundles: [("laptop", try bundle(&reinstalled)), ("phone", try bundle(&phone))], using: &random)
        XCTAssertEqual(notices, [.deviceKeyChanged(user: "bob", device: "laptop"), .newDevice(user: "bob", device: "phone")])
        let envelope = try alice.seal(Array("x".utf8), to: "bob")
        XCTAssertEqual(try reinstalled.open(envelope, from: "alice", now: 0, using: &random).plaintext, Array("x".utf8))
        // The same bundle fetched again changes nothing (no new session, nothing to tell).
        XCTAssertEqual(
            try alice.updateDevices(of: "bob", bundles: [("laptop", try bundle(&reinstalled)), ("phone", try bundle(&phone))], using: &random), [])
    }

    func testStateSurvivesAReloadFromTheStore() throws {
        let store = MemoryStateStore()
        var alice = try device("desk", store: store)
        var laptop = try device("laptop")
        _ = try alice.updateDevices(of: "bob", bundles: [("laptop", try bundle(&laptop))], using: &random)
        _ = try laptop.open(try alice.seal(Array("one".utf8), to: "bob"), from: "alice", now: 0, using: &random)
        var again = try device("desk", store: store)
        XCTAssertEqual(again.local.identity.publicKey, alice.local.identity.publicKey)
        let second = try again.seal(Array("two".utf8), to: "bob")
        XCTAssertEqual(try laptop.open(second, from: "alice", now: 0, using: &random).plaintext, Array("two".utf8))
    }

    func testEnvelopeRoundTripsAndRefusesTrailingBytes() throws {
        let envelope = E2EEnvelope(senderDevice: "desk", copies: [("laptop", [1, 2, 3]), ("", [])])
        XCTAssertEqual(try E2EEnvelope(encoded: envelope.encoded), envelope)
        XCTAssertEqual(
            envelope.encoded, [1, 5, 0, 4] + Array("desk".utf8) + [2, 0, 6] + Array("laptop".utf8) + [0, 0, 0, 3, 1, 2, 3, 0, 0, 0, 0, 0, 0])
        XCTAssertThrowsError(try E2EEnvelope(encoded: envelope.encoded + [0]))
        XCTAssertThrowsError(try E2EEnvelope(encoded: Array(envelope.encoded.dropLast())))
    }
}
