import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// The store refuses what would take a user past a cap on its state (`StoreAnswer.limitReached`):
/// the core tells the user why with ERROR LIMIT_REACHED, counts it, and a refused login is
/// closed without CONNECTED.
final class DeviceLimitCoreTests: XCTestCase {
    func testALoginOverTheDevicesCapIsRefusedAndClosed() {
        var relay = DevRelay()
        let connection = ConnectionID(1)
        _ = relay.open(connection)
        let actions = relay.control(DevRelay.connectMessage("alice", udpPort: 50_000), on: connection)
        guard case .store(let register)? = actions.last, case .register = register else { return XCTFail("\(actions)") }
        let why = RelayCore.tooManyDevicesText(device: "", limit: 16)
        let refused = relay.answer(.limitReached(register, reason: why))
        XCTAssertEqual(
            refused,
            [
                .reject(.limitReached, detail: "login of alice device : \(why)"),
                .send(connection, .error(.limitReached, why)),
                .close(connection),
            ])
        XCTAssertEqual(relay.core.sessionCount, 0, "no session stays")
    }

    func testAKeyPublishOverTheDevicesCapIsRefusedWithItsMessageId() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: ConnectionID(1), port: 50_000)
        let publish = KeysPublish(user: "alice", device: "", bundle: [1], oneTimePrekeys: [], connection: ConnectionID(1), messageId: 9)
        let why = RelayCore.tooManyDevicesText(device: "", limit: 16)
        XCTAssertEqual(
            relay.answer(.limitReached(.publishKeys(publish), reason: why)),
            [
                .reject(.limitReached, detail: "KEYS_PUBLISH of alice device : \(why)"),
                .send(ConnectionID(1), .error(.limitReached, why, messageId: 9)),
            ])
    }
}
