import NIOCore
import SIMPClient
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// A message too large for the relay's datagrams fails at once at the sender, saying its size
/// and the limit, instead of a minute of retransmissions the relay drops.
final class OversizedMessageTests: RelayTestCase {
    func testTooLargeTextFailsAtOnceWithItsSizeAndTheLimit() async throws {
        let bob = TestRelay.uniqueUser("bob")
        _ = try await relay.connectClient(user: bob)
        let alice = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))

        for text in [String(repeating: "a", count: 9000), String(repeating: "中", count: 2800)] {
            let start = NIODeadline.now()
            let result = try await alice.send(text: text, to: bob)
            let elapsed = NIODeadline.now() - start

            guard case .failed(_, .tooLarge(let size, let limit)) = result else { return XCTFail("\(result)") }
            XCTAssertLessThan(elapsed, .seconds(1))
            XCTAssertEqual(limit, 8192)
            XCTAssertGreaterThan(size, text.utf8.count)
            let text = DeliveryFailure.tooLarge(size: size, limit: limit).description
            XCTAssertTrue(text.contains("\(size)-byte datagram") && text.contains("at most 8192 bytes"), text)
        }
        let stats = try await relay.server.statistics()
        XCTAssertNil(stats.rejected[.datagramTooLarge], "nothing reached the relay")
        let fits = try await alice.send(text: String(repeating: "a", count: 8000), to: bob)
        guard case .delivered = fits else { return XCTFail("8000 bytes of text fit: \(fits)") }
    }
}

/// The limit comes from the relay's CONNECTED.
final class RelayDatagramLimitTests: RelayTestCase {
    override func configureRelay(_ configuration: inout RelayConfiguration) {
        configuration.maxDatagramSize = 1024
    }

    func testTheClientUsesTheLimitTheRelayAnnounces() async throws {
        let bob = TestRelay.uniqueUser("bob")
        _ = try await relay.connectClient(user: bob)
        let alice = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))

        let result = try await alice.send(text: String(repeating: "a", count: 1100), to: bob)

        guard case .failed(_, .tooLarge(_, let limit)) = result else { return XCTFail("\(result)") }
        XCTAssertEqual(limit, 1024)
        // The size check counts the fields the client fills in at their largest likely sizes
        // (125 bytes besides the text here, docs/PROTOCOL.md §5.2).
        let fits = try await alice.send(text: String(repeating: "a", count: 890), to: bob)
        guard case .delivered = fits else { return XCTFail("890 bytes of text fit in 1024: \(fits)") }
    }
}
