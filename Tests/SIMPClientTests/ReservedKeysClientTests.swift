import Foundation
import SIMPClient
import SIMPCore
import SIMPE2E
import SIMPTestSupport
import XCTest

/// A client that closes normally gives back the sending keys it reserved ahead (docs/E2E.md
/// §15): the next process of its device seals with the next key unused, so its peer skips none.
final class ReservedKeysClientTests: EndToEndRelayTestCase {
    func testAClosedClientGivesBackTheKeysItReservedAndTheNextProcessGoesOnFromThem() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobClient = try await connectEndToEnd(bob, device: "phone")
        let aliceClient = try await connectEndToEnd(alice, device: "desk")
        for index in 0..<10 {
            guard case .delivered = try await aliceClient.send(text: "m\(index)", to: bob) else { return XCTFail("m\(index) not delivered") }
        }
        await aliceClient.close()
        await bobClient.close()
        // Ten messages on one chain: while alice's client ran, its stored session was 3 keys
        // ahead (a reservation of 8 keys made at the 6th message); at close it was written as it is.
        var random = SystemRandomNumberGenerator()
        var device = try E2EDevice(store: EndToEndFileStore(home: home, user: alice, device: "desk"), using: &random)
        let next = try device.encrypt(Array("next process".utf8), to: "\(bob)/phone")
        XCTAssertEqual(try PairwiseMessage(encoded: next).header.number, 10, "the next process seals with key 10, the first unused")
    }
}
