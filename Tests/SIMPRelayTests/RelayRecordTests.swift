import NIOCore
import SIMPClient
import SIMPCore
import SIMPRedis
import SIMPRelay
import SIMPTestSupport
import XCTest

/// One liveness record per relay vouches for all its users (docs/PROTOCOL.md §7.1, §7.2):
/// registrations are written at connect, move and disconnect only, and readers treat a user
/// whose relay is dead, or alive in another incarnation, as offline. Real relays, real Redis.
final class RelayRecordTests: XCTestCase {
    private var cluster: TestRelayCluster?
    private var extra: BackgroundRelay?

    override func tearDown() async throws {
        await extra?.shutdown()
        await cluster?.stop()
    }

    /// What Redis has executed so far: `cmdstat_<name>` → calls (commands inside scripts included).
    private static func commandCalls(_ redis: RedisClient) async throws -> [String: Int] {
        let info = try await redis.command(["INFO", "commandstats"]).string ?? ""
        var calls: [String: Int] = [:]
        for line in info.split(whereSeparator: \.isNewline) where line.hasPrefix("cmdstat_") {
            let name = line.dropFirst("cmdstat_".count).prefix { $0 != ":" }
            if let range = line.range(of: "calls="), let count = Int(line[range.upperBound...].prefix { $0.isNumber }) {
                calls[String(name)] = count
            }
        }
        return calls
    }

    func testAnIdleRelayWritesOnlyItsOwnRecordWhateverItsSessions() async throws {
        let redis = try await RedisServerProcess.startPrivate()
        let relay = try await TestRelay.start(redis: redis) { $0.registrationTTLSeconds = 3 } // renewed every 100 ms
        defer { Task { await relay.stop() } }
        for index in 0..<12 { _ = try await relay.connectClient(user: TestRelay.uniqueUser("idle\(index)")) }
        // The logins' own writes are done once a renewal went by with nothing else (however long
        // a loaded machine takes for them).
        var before = try await Self.commandCalls(relay.inspector)
        let quiet = try await Eventually.holds {
            let now = try await Self.commandCalls(relay.inspector)
            defer { before = now }
            let delta = Self.delta(now, before)
            return delta["set", default: 0] > 0 && delta.values.reduce(0, +) == delta["set"]
        }
        XCTAssertTrue(quiet, "the logins' writes ended")

        // 15 renewals (at 100 ms each alone), and 1.5 registration TTLs of the old design; on a
        // loaded machine the renewals come later: the bars are per renewal, not per second.
        let idleFrom = before
        var delta: [String: Int] = [:]
        let renewed = try await Eventually.holds {
            delta = Self.delta(try await Self.commandCalls(relay.inspector), idleFrom)
            return delta["set", default: 0] >= 15
        }
        XCTAssertTrue(renewed, "the relay renews its record: \(delta)")

        XCTAssertNil(delta["evalsha"], "no registration or presence script runs while sessions are idle: \(delta)")
        XCTAssertNil(delta["eval"], "\(delta)")
        let renewals = delta["set"] ?? 0
        XCTAssertEqual(delta.values.reduce(0, +), renewals, "one command per renewal, none per session: \(delta)")
    }

    /// The commands run between two `commandCalls` (INFO itself left out).
    private static func delta(_ after: [String: Int], _ before: [String: Int]) -> [String: Int] {
        after.merging(before) { $0 - $1 }.filter { $0.value > 0 && $0.key != "info" }
    }

    /// Two relays: carol (who does not reconnect) on relay 0, dave on relay 1 giving up a message
    /// after three quick transmissions; both are members of one room, so he is shown her presence
    /// (a room rather than a message from her: that would leave relay 1 a cached route to her).
    private func carolOnRelay0AndDaveOnRelay1(registrationTTL: Int) async throws -> (TestRelayCluster, String, SIMPClient) {
        let cluster = try await TestRelayCluster.start(relays: 2) { _, configuration in configuration.registrationTTLSeconds = registrationTTL }
        self.cluster = cluster
        let carol = TestRelay.uniqueUser("carol"), dave = TestRelay.uniqueUser("dave")
        let carolClient = try await cluster.connectClient(user: carol, relay: 0) { $0.reconnect = nil }
        let daveClient = try await cluster.connectClient(user: dave, relay: 1) {
            $0.retransmit.maxAttempts = 3
            $0.retransmit.initialRTO = .milliseconds(60)
        }
        let room = "room-\(UInt32.random(in: .min ... .max))"
        _ = try await carolClient.joinRoom(room)
        _ = try await daveClient.joinRoom(room)
        let shown = try await Eventually.holds { try await daveClient.who([carol]).first?.online == true }
        XCTAssertTrue(shown, "a room peer sees carol online")
        return (cluster, carol, daveClient)
    }

    func testAUserOfADeadRelayIsOfflineOnceItsRecordExpiresAndMessagesToItAreStored() async throws {
        let (cluster, carol, daveClient) = try await carolOnRelay0AndDaveOnRelay1(registrationTTL: 2)
        let deadId = cluster.relays[0].server.configuration.relayId
        await cluster.relays[0].server.crash()

        let expired = try await Eventually.holds {
            try await cluster.inspector.command(["EXISTS", Registry.relayKey(deadId)]).integer == 0
        }
        XCTAssertTrue(expired, "the dead relay's record outlives its TTL")
        let entry = try await cluster.inspector.command(["HGET", Registry.userKey(carol), "relay"]).string
        XCTAssertEqual(entry, deadId, "carol's registration is not written per user, so it is still there")

        let listed = try await SessionDirectory(redis: cluster.inspector).entry(of: carol)
        XCTAssertNil(listed, "`simp-server sessions` does not list her either")
        let presence = try await daveClient.who([carol])
        XCTAssertEqual(presence.map(\.online), [false], "a user of a dead relay is offline: \(presence)")
        let result = try await daveClient.send(text: "are you there?", to: carol)
        guard case .stored = result else { return XCTFail("carol's relay is dead: stored for her, got \(result)") }
        let cleaned = try await Eventually.holds {
            let fields = try await cluster.inspector.command(["HKEYS", Registry.userKey(carol)]).array?.compactMap(\.string) ?? []
            return !fields.contains { $0.hasPrefix("s:") }
        }
        XCTAssertTrue(cleaned, "the reader removed the session its relay no longer vouches for")
    }

    func testARestartedRelayWithTheSameIdDoesNotVouchForItsPreviousLifesUsers() async throws {
        let (cluster, carol, daveClient) = try await carolOnRelay0AndDaveOnRelay1(registrationTTL: 30)
        var configuration = cluster.relays[0].server.configuration
        await cluster.relays[0].server.crash() // no withdrawal: carol's registration stays
        configuration.port = 0
        configuration.udpPort = 0
        extra = try await BackgroundRelay.start(configuration: configuration) // same relay id, new life, record still alive

        let result = try await daveClient.send(text: "still there?", to: carol)
        guard case .stored = result else {
            return XCTFail("the relay's new life does not hold carol: stored for her at once, got \(result)")
        }
        let presence = try await daveClient.who([carol])
        XCTAssertEqual(presence.map(\.online), [false], "\(presence)")
    }
}

/// A Redis that loses everything while the relay runs: the relay notices its record is gone
/// and writes every registration again.
final class RedisFlushTests: XCTestCase {
    func testARelayWritesItsUsersAgainAfterRedisIsFlushed() async throws {
        let redis = try await RedisServerProcess.startPrivate()
        let relay = try await TestRelay.start(redis: redis) { $0.registrationTTLSeconds = 3 }
        defer { Task { await relay.stop() } }
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobClient = try await relay.connectClient(user: bob)
        let aliceClient = try await relay.connectClient(user: alice)
        let relayKey = Registry.relayKey(relay.server.configuration.relayId)
        let before = try await relay.inspector.command(["GET", relayKey]).string

        _ = try await relay.inspector.command(["FLUSHALL"])
        let healed = try await Eventually.holds {
            try await relay.inspector.command(["EXISTS", Registry.userKey(bob), Registry.userKey(alice)]).integer == 2
        }
        XCTAssertTrue(healed, "the relay found its record gone and wrote its users' registrations again")
        let after = try await relay.inspector.command(["GET", relayKey]).string
        XCTAssertNotNil(after)
        XCTAssertNotEqual(after, before, "a new incarnation began")
        let entry = try await relay.inspector.command(["HGETALL", Registry.userKey(bob)]).array?.compactMap(\.string) ?? []
        let incarnation = after?.split(separator: " ").first { $0.hasPrefix("incarnation=") }?.dropFirst("incarnation=".count)
        XCTAssertTrue(entry.contains { $0.hasPrefix("\(incarnation ?? "?") r ") }, "bob's entry carries it: \(entry)")
        // alice is shown the presence of a room peer (the flush took every earlier conversation).
        let room = "room-\(UInt32.random(in: .min ... .max))"
        _ = try await bobClient.joinRoom(room)
        _ = try await aliceClient.joinRoom(room)
        let presence = try await aliceClient.who([bob])
        XCTAssertEqual(presence.map(\.online), [true], "\(presence)")
        let result = try await aliceClient.send(text: "after the flush", to: bob)
        guard case .delivered = result else { return XCTFail("\(result)") }
    }
}
