import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// SIMPCoreTestKit's `DevRelay` checks the steps it takes for a test (`connect`, `complete`) and
/// throws, naming the step, when the core does something else: a test that relies on them fails
/// there rather than later with a puzzling difference.
final class DevRelayTests: XCTestCase {
    func testConnectKeepsTheUsersKeysAndTheRelaySealsForThem() throws {
        var relay = DevRelay()
        let completion = try relay.connect("alice", on: ConnectionID(1), port: 5001)
        XCTAssertEqual(completion, relay.registeredActions("alice"))
        XCTAssertEqual(relay.clients["alice"]?.address, try SocketAddress(ipAddress: "127.0.0.1", port: 5001))
        try relay.connect("bob", on: ConnectionID(2), port: 5002)
        let sent = relay.send(SIMPMessage(kind: .text, messageId: 1, fromUser: "alice", toUser: "bob", content: "hi"))
        XCTAssertEqual(try relay.delivered(to: "bob", in: sent).map(\.content), ["hi"], "opened with bob's keys")
    }

    func testConnectThrowsNamingTheStepWhenTheCoreDoesNotRegisterTheUser() throws {
        var relay = DevRelay { $0.requireLogin = true } // CONNECT without login is refused
        XCTAssertThrowsError(try relay.connect("alice", on: ConnectionID(1), port: 5001)) { error in
            let unexpected = error as? UnexpectedActions
            XCTAssertEqual(unexpected?.step, "CONNECT registers alice")
            XCTAssertNotNil(unexpected?.expected)
        }
        XCTAssertNil(relay.clients["alice"], "no keys kept for a user the relay did not accept")
    }

    func testCompleteThrowsWhenTheStoreWasNeverAskedToRegister() throws {
        var relay = DevRelay()
        _ = relay.open(ConnectionID(1))
        XCTAssertThrowsError(try relay.complete("alice", on: ConnectionID(1), port: 5001)) { error in
            XCTAssertEqual((error as? UnexpectedActions)?.step, "the registration of alice is answered with CONNECTED")
        }
    }
}
