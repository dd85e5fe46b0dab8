import NIOCore
import SIMPBench
import SIMPCore
import SIMPRedis
import SIMPRelay
import SIMPTestSupport
import XCTest

/// A user may have `RelayLimits.maxDevicesPerUser` devices (here 2): the login of one more
/// receiving device, and the key bundle of one more device, are refused with ERROR
/// LIMIT_REACHED and leave nothing in Redis; the devices it has keep working.
final class DeviceLimitTests: RelayTestCase {
    private var devices: [RawDevice] = []

    override func configureRelay(_ configuration: inout RelayConfiguration) {
        configuration.limits.maxDevicesPerUser = 2
    }

    override func tearDown() async throws {
        for device in devices { await device.close() }
        try await super.tearDown()
    }

    private func device(_ user: String, _ name: String, sendOnly: Bool = false) async throws -> RawDevice {
        let device = try await RawDevice(
            user: user, password: TestRelay.password(for: user), device: name, sendOnly: sendOnly, controlPort: relay.port)
        devices.append(device)
        return device
    }

    func testTheLoginOfOneReceivingDeviceMoreIsRefusedAndTheOthersStay() async throws {
        let user = TestRelay.uniqueUser("devices")
        try await relay.addUser(user)
        _ = try await device(user, "a")
        _ = try await device(user, "b")
        let third = RawControlConnection()
        try await third.connect(port: relay.port)
        do {
            try await third.login(user: user, password: TestRelay.password(for: user), udpPort: 9, device: "c")
            XCTFail("a third receiving device logged in")
        } catch {}
        let refused = try await third.first(.error)
        XCTAssertEqual(refused?.errorCode, .limitReached)
        XCTAssertEqual(refused?.errorText, RelayCore.tooManyDevicesText(device: "c", limit: 2))
        let closed = await Eventually.holds { third.isClosed }
        XCTAssertTrue(closed, "the refused connection is closed")
        await third.close()
        let known = try await relay.inspector.command(["HKEYS", Registry.devicesKey(user)]).array?.compactMap(\.string)
        XCTAssertEqual(known?.sorted(), ["a", "b"], "the third device was not written")
        _ = try await device(user, "a") // a device it has logs in again
        _ = try await device(user, "c", sendOnly: true) // a send-only session is no new device
    }

    func testTheKeyBundleOfOneDeviceMoreIsRefused() async throws {
        let user = TestRelay.uniqueUser("bundles")
        try await relay.addUser(user)
        for name in ["a", "b"] {
            let device = try await device(user, name)
            let published = try await publish(on: device)
            XCTAssertEqual(published?.kind, .keysPublish, "\(name): \(String(describing: published))")
        }
        let sender = try await device(user, "c", sendOnly: true)
        let refused = try await publish(on: sender)
        XCTAssertEqual(refused?.kind, .error)
        XCTAssertEqual(refused?.errorCode, .limitReached)
        XCTAssertEqual(refused?.errorText, RelayCore.tooManyDevicesText(device: "c", limit: 2))
        let bundles = try await relay.inspector.command(["HKEYS", KeyBundleStore.bundlesKey(user)]).array?.compactMap(\.string)
        XCTAssertEqual(bundles?.sorted(), ["a", "b"])
        let prekeys = try await relay.inspector.command(["EXISTS", KeyBundleStore.prekeysKey(user, device: "c")]).integer
        XCTAssertEqual(prekeys, 0, "none of the refused device's prekeys were kept")
    }

    /// Publishes a bundle with one one-time prekey on `device`; the answer (KEYS_PUBLISH or ERROR).
    private func publish(on device: RawDevice) async throws -> SIMPMessage? {
        var publish = SIMPMessage(kind: .keysPublish, messageId: 41)
        publish.keyBundles = [AbuseAttack.bundle]
        publish.oneTimePrekeys = [Array(repeating: 3, count: RelayCore.oneTimePrekeySize)]
        try await device.control.send(publish)
        var answer: SIMPMessage?
        _ = try await Eventually.holds {
            answer = try await device.control.received().first { $0.messageId == 41 && [.keysPublish, .error].contains($0.kind) }
            return answer != nil
        }
        return answer
    }
}
