import NIOCore
import SIMPClient
import SIMPTestSupport
import XCTest

/// Two users on two relays sending each other a stream of numbered messages while something
/// happens to Redis, and what their applications received: lost, duplicated, out of order.
struct StreamCheck {
    var results: [SendResult] = []
    /// What each side's application received, in arrival order.
    var received: [[String]] = []
    let count: Int

    /// Connects alice to relay 0 and bob to relay 1 with a retransmission budget that outlasts
    /// a failover, sends `count` messages each way 50 ms apart, and runs `disruption` after a
    /// quarter of them.
    static func run(
        _ relays: ClusterRelays, alice: String, bob: String, count: Int = 40,
        disruption: @escaping @Sendable () async throws -> Void
    ) async throws -> StreamCheck {
        let patient: (inout ClientConfiguration) -> Void = { configuration in
            configuration.retransmit.maximumRTO = .seconds(1)
            configuration.retransmit.maxAttempts = 30
        }
        let aliceClient = try await relays.connectClient(user: alice, relay: 0, configure: patient)
        let bobClient = try await relays.connectClient(user: bob, relay: 1, configure: patient)
        let inboxes = [MessageInbox(aliceClient), MessageInbox(bobClient)]
        async let fromAlice = send(count, from: aliceClient, to: bob)
        async let fromBob = send(count, from: bobClient, to: alice)
        // A quarter of each stream arrived: the disruption comes mid-stream (if they never get
        // under way, what was received says so below).
        _ = await Eventually.holds { await Self.counts(inboxes).allSatisfy { $0 >= count / 4 } }
        try await disruption()
        var check = StreamCheck(count: count)
        check.results = try await fromAlice + fromBob
        for inbox in inboxes { _ = await inbox.waitFor(count) }
        _ = await Eventually.stays { await Self.counts(inboxes).allSatisfy { $0 == count } } // quiet period: room for a stray duplicate
        for inbox in inboxes { check.received.append(await inbox.messages.map(\.content)) }
        return check
    }

    private static func counts(_ inboxes: [MessageInbox]) async -> [Int] {
        var counts: [Int] = []
        for inbox in inboxes { counts.append(await inbox.messages.count) }
        return counts
    }

    /// Sends `count` messages 50 ms apart, each waited for concurrently; results in send order.
    private static func send(_ count: Int, from client: SIMPClient, to user: String) async throws -> [SendResult] {
        try await withThrowingTaskGroup(of: (Int, SendResult).self) { group in
            for index in 0..<count {
                group.addTask { (index, try await client.send(text: "m\(index)", to: user)) }
                try await Task.sleep(nanoseconds: 50_000_000) // paced, 20 a second
            }
            return try await group.reduce(into: [SendResult?](repeating: nil, count: count)) { $0[$1.0] = $1.1 }.compactMap { $0 }
        }
    }

    /// Messages sent but never received, by either side.
    var lost: Int { received.reduce(0) { total, texts in total + expected.filter { !texts.contains($0) }.count } }
    /// Receptions beyond the first of a message.
    var duplicated: Int { received.reduce(0) { $0 + $1.count - Set($1).count } }
    /// Receptions that came before a message sent earlier.
    var outOfOrder: Int {
        received.reduce(0) { total, texts in
            let numbers = texts.compactMap { Int($0.dropFirst()) }
            return total + zip(numbers, numbers.dropFirst()).filter { $0 >= $1 }.count
        }
    }
    private var expected: [String] { (0..<count).map { "m\($0)" } }

    /// The slowest receipt and the transmissions made, for the test log.
    var summary: String {
        var slowest = TimeAmount.zero, attempts = 0
        for case .delivered(_, let latency, let tries) in results {
            slowest = max(slowest, latency)
            attempts += tries
        }
        return "\(results.count) sends, \(attempts) transmissions, slowest receipt \(slowest.nanoseconds / 1_000_000) ms; "
            + "lost \(lost), duplicated \(duplicated), out of order \(outOfOrder)"
    }

    func assertExactlyOnceInOrder(file: StaticString = #filePath, line: UInt = #line) {
        print("StreamCheck: \(summary)")
        let failed = results.filter {
            if case .delivered = $0 { return false }; return true
        }
        XCTAssertEqual(failed, [], "every send is receipted", file: file, line: line)
        XCTAssertEqual(results.count, 2 * count, file: file, line: line)
        XCTAssertEqual([lost, duplicated, outOfOrder], [0, 0, 0], "lost, duplicated, out of order: \(received)", file: file, line: line)
    }
}
