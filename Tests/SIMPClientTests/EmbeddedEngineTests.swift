import NIOCore
import SIMPCore
import XCTest

@testable import SIMPClient

/// `ClientEngine` in an injected `Environment` (as simp-lab's simulator runs it): connecting
/// through the given factory, its ids, clock and timers on the given loop, and the engine's
/// own handling of read bursts.
final class EmbeddedEngineTests: XCTestCase {
    func testEnginesConnectThroughTheirEnvironmentAndAMessageIsDeliveredAndReceiptedInVirtualTime() throws {
        let engines = try EmbeddedEngines()
        let alice = try engines.engine(user: "alice", host: 1, firstMessageId: 7_000)
        let bob = try engines.engine(user: "bob", host: 2, firstMessageId: 9_000)
        var taken: [SIMPMessage] = []
        bob.onMessage = {
            taken.append($0)
            return true
        }
        alice.connectOrRetry()
        bob.connectOrRetry()
        try engines.pump()
        XCTAssertNotNil(alice.control)
        XCTAssertNotNil(bob.control)

        engines.passes = { _, _ in false } // the first copy is lost: alice's timer sends it again
        let (id, result) = alice.send(SIMPMessage(kind: .text, toUser: "bob", content: "hi"))
        var settled: SendResult?
        result.assumeIsolated().whenSuccess { settled = $0 }
        try engines.pump()
        engines.passes = { _, _ in true }
        try engines.advance(by: .seconds(2))

        XCTAssertEqual(id, 7_000)
        XCTAssertEqual(taken.map(\.content), ["hi"])
        XCTAssertEqual(taken.first?.time, 1_700_000_000_000) // the environment's wall clock
        guard case .delivered(7_000, _, let attempts)? = settled else { return XCTFail("\(String(describing: settled))") }
        XCTAssertGreaterThan(attempts, 1)
    }

    /// Heartbeats both ways at 100 ms (the relay gives a connection up after 3 missed): a client
    /// that answers the relay's PINGs stays connected through eight intervals of silence, in
    /// virtual time (real sockets under load could miss three intervals without a fault).
    func testAClientAnsweringPingsStaysConnectedThroughEightIntervalsOfSilence() throws {
        let fast = HeartbeatPolicy(interval: .milliseconds(100), missLimit: 3)
        let engines = try EmbeddedEngines { $0.heartbeat = fast }
        let bob = try engines.engine(user: "bob", host: 2, firstMessageId: 9_000) { $0.heartbeat = fast }
        bob.connectOrRetry()
        try engines.pump()
        let control = try XCTUnwrap(bob.control)

        for _ in 0..<16 { try engines.advance(by: .milliseconds(50)) }

        XCTAssertTrue(control.isActive)
        XCTAssertTrue(bob.control === control, "the same connection, not a reconnect")
        XCTAssertEqual(engines.relay.statistics.connectedUsers, 1)
        XCTAssertNil(engines.relay.statistics.rejected[.heartbeatTimeout])
    }

    func testAnArrivalThatSuggestsLossMakesOnlyItsOwnBurstsReceiptsUrgent() throws {
        let engines = try EmbeddedEngines()
        let alice = try engines.engine(user: "alice", host: 1, firstMessageId: 1_000)
        let bob = try engines.engine(user: "bob", host: 2, firstMessageId: 2_000)
        let carol = try engines.engine(user: "carol", host: 3, firstMessageId: 3_000)
        for engine in [alice, bob, carol] { engine.connectOrRetry() }
        try engines.pump()

        // Bob's first message is lost: his second arrives alone, is held, and its burst ends
        // with no receipt batched.
        var bobsDatagrams = 0
        let bobsAddress = try SocketAddress(ipAddress: "10.0.0.2", port: 50_000)
        engines.passes = { from, _ in
            guard from == bobsAddress else { return true }
            bobsDatagrams += 1
            return bobsDatagrams != 1
        }
        _ = bob.send(SIMPMessage(kind: .text, toUser: "alice", content: "one"))
        _ = bob.send(SIMPMessage(kind: .text, toUser: "alice", content: "two"))
        try engines.pump()
        XCTAssertEqual(alice.session.receiver.heldCount, 1)

        // Carol's message arrives in order in a burst of its own: its receipt waits for others
        // (receiptBatchDelay), as in any burst that suggested no loss.
        let (_, carolsResult) = carol.send(SIMPMessage(kind: .text, toUser: "alice", content: "hello"))
        try engines.pump()
        var settled: SendResult?
        carolsResult.assumeIsolated().whenSuccess { settled = $0 }
        XCTAssertNil(settled, "the receipt went at the end of a burst that suggested no loss")
        try engines.advance(by: ReceiptBatcher.defaultDelay)
        guard case .delivered? = settled else { return XCTFail("\(String(describing: settled))") }
    }
}
