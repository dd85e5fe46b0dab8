import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPRedis
import SIMPRelay
import SIMPTestSupport
import XCTest

/// End-to-end encryption through real relays and a real Redis: the relay and Redis
/// carry ciphertext only, while the receiving client reads the text.
final class EndToEndRelayTests: XCTestCase {
    var cluster: TestRelayCluster!
    var home: URL!

    override func setUp() async throws {
        home = FileManager.default.temporaryDirectory.appendingPathComponent("simp-e2e-\(UUID().uuidString)")
    }

    override func tearDown() async throws {
        await cluster?.stop()
        try? FileManager.default.removeItem(at: home)
    }

    func connect(_ user: String, relay: Int, endToEnd: Bool = true) async throws -> SIMPClient {
        try await cluster.connectClient(user: user, relay: relay) { configuration in
            if endToEnd { configuration.endToEnd = EndToEndSettings(home: self.home) }
        }
    }

    /// A direct message across two relays and a message stored for an offline user: the texts
    /// appear nowhere in Redis (every key and value, base64 decoded too) nor in the traffic the
    /// relays send Redis (MONITOR: every command, PUBLISH payloads between relays included), yet
    /// the receiver reads them. A message sent without end-to-end encryption is found in both
    /// places, so the search can fail.
    func testTheRelayAndRedisSeeNoPlaintextWhileTheReceiverReadsIt() async throws {
        let monitor = try await startTwoRelaysAndMonitor()
        defer { monitor.signal(SIGTERM) }

        let (alice, bob, carol) = (TestRelay.uniqueUser("alice"), TestRelay.uniqueUser("bob"), TestRelay.uniqueUser("carol"))
        let direct = "the eagle lands at midnight", stored = "vault code 4417", plain = "an unencrypted control line"
        let aliceClient = try await connect(alice, relay: 0)
        let bobClient = try await connect(bob, relay: 1)
        let bobInbox = MessageInbox(bobClient)

        guard case .delivered = try await aliceClient.send(text: direct, to: bob) else { return XCTFail("not delivered") }
        let carolClient = try await connect(carol, relay: 0, endToEnd: false)
        guard case .delivered = try await carolClient.send(text: plain, to: bob) else { return XCTFail("not delivered") }
        let arrived = await bobInbox.waitFor(2)
        XCTAssertTrue(arrived)
        await bobClient.close()
        let gone = try await Eventually.holds { try await self.cluster.inspector.command(["EXISTS", "simp:user:{\(bob)}"]).integer == 0 }
        XCTAssertTrue(gone)
        let storing = try await aliceClient.send(text: stored, to: bob)
        guard case .stored = storing else { return XCTFail("not stored: \(storing)") }

        let redisText = try await everyKeyAndValue()
        XCTAssertFalse(Self.reveals(redisText, stored), "the stored message is readable in Redis")
        XCTAssertFalse(Self.reveals(redisText, direct))
        XCTAssertTrue(redisText.contains("simp:log:{\(bob)}"), "the stored message is in Redis (as ciphertext)")

        let bobAgain = try await connect(bob, relay: 1)
        let laterInbox = MessageInbox(bobAgain)
        let delivered = await laterInbox.waitFor(1)
        XCTAssertTrue(delivered)
        let (first, later) = (await bobInbox.messages, await laterInbox.messages)
        XCTAssertEqual(first.map(\.content), [direct, plain])
        XCTAssertEqual(first.map(\.isEndToEnd), [true, false])
        XCTAssertEqual(later.map(\.content), [stored])

        let traffic = monitor.standardOutput
        XCTAssertTrue(traffic.contains("\"PUBLISH\" \"simp:relay:"), "the relays published to each other")
        XCTAssertTrue(Self.reveals(traffic, plain), "the search finds an unencrypted message on the relay-Redis link")
        XCTAssertFalse(Self.reveals(traffic, direct), "the direct message crossed the relay-Redis link readable")
        XCTAssertFalse(Self.reveals(traffic, stored), "the stored message crossed the relay-Redis link readable")
    }

    /// Concurrent fetches against real Redis: each one-time prekey goes to one sender only,
    /// then none is left; a device the asker has a session with keeps its prekeys.
    func testEachOneTimePrekeyIsHandedOutOnce() async throws {
        cluster = try await TestRelayCluster.start(relays: 1)
        let keys = KeyBundleStore(redis: cluster.inspector)
        let loop = cluster.inspector.eventLoop
        let bob = TestRelay.uniqueUser("bob")
        let prekeys = (0..<5).map { [UInt8](repeating: UInt8($0), count: 36) }
        let publish = KeysPublish(user: bob, device: "laptop", bundle: [1, 2, 3], oneTimePrekeys: prekeys, connection: ConnectionID(1), messageId: 1)
        let publishedReply = try await keys.publish(publish, on: loop).get()
        let published = try XCTUnwrap(publishedReply)
        XCTAssertEqual(published.left, 5)
        XCTAssertEqual(published.change, .newDevice)
        let kept = try await keys.fetch(
            KeysFetch(user: bob, skipClaimFor: ["laptop"], connection: ConnectionID(1), messageId: 2, asker: "alice"), on: loop
        ).get()
        XCTAssertEqual(kept.devices, [DeviceKeys(device: "laptop", bundle: [1, 2, 3], oneTimePrekey: nil)])
        var again = publish
        again.oneTimePrekeys = []
        let republishedReply = try await keys.publish(again, on: loop).get()
        let republished = try XCTUnwrap(republishedReply)
        XCTAssertEqual(republished.change, .unchanged, "the same bundle at the next login is no news")
        XCTAssertEqual(republished.watchers, ["alice"], "who fetched bob's bundles")
        again.bundle = [4, 5, 6]
        let changedReply = try await keys.publish(again, on: loop).get()
        let changed = try XCTUnwrap(changedReply)
        XCTAssertEqual(changed.change, .changed)
        again.bundle = [1, 2, 3]
        _ = try await keys.publish(again, on: loop).get()

        let fetches = (0..<8).map { id in
            keys.fetch(KeysFetch(user: bob, skipClaimFor: [], connection: ConnectionID(1), messageId: UInt64(id)), on: loop)
        }
        var claimed: [[UInt8]] = []
        for fetch in fetches { claimed += try await fetch.get().devices.compactMap(\.oneTimePrekey) }
        XCTAssertEqual(claimed.count, 5)
        XCTAssertEqual(Set(claimed), Set(prekeys), "each prekey handed out once")
        let unknown = try await keys.fetch(
            KeysFetch(user: TestRelay.uniqueUser("nobody"), skipClaimFor: [], connection: ConnectionID(1), messageId: 3), on: loop
        ).get()
        XCTAssertFalse(unknown.known)
    }

    /// Two relays on one Redis, and `redis-cli monitor` of that Redis (stop it when done).
    func startTwoRelaysAndMonitor() async throws -> ChildProcess {
        // A short route cache: relay 0 learns at once that bob left relay 1 (the test clients
        // give up after 6 quick transmissions, sooner than the default 2 s cache expires).
        cluster = try await TestRelayCluster.start(relays: 2) { _, configuration in configuration.routeCacheTTL = .milliseconds(100) }
        let url = cluster.redis.url
        let monitor = try ChildProcess("/usr/bin/redis-cli", ["-h", url.host, "-p", String(url.port), "monitor"])
        let monitoring = try await Eventually.holds {
            try await self.cluster.inspector.command(["PING"]).string != nil && monitor.standardOutput.contains("PING")
        }
        XCTAssertTrue(monitoring, "redis-cli monitor did not start")
        return monitor
    }

    /// Every key, its type and its value(s), one line each.
    func everyKeyAndValue() async throws -> String {
        let redis = cluster.inspector
        var lines: [String] = []
        for key in try await redis.scanKeys(matching: "*") {
            let type = try await redis.command(["TYPE", key]).string ?? ""
            let read: [String]
            switch type {
            case "string": read = ["GET", key]
            case "hash": read = ["HGETALL", key]
            case "list": read = ["LRANGE", key, "0", "-1"]
            case "set": read = ["SMEMBERS", key]
            case "zset": read = ["ZRANGE", key, "0", "-1", "WITHSCORES"]
            case "stream": read = ["XRANGE", key, "-", "+"]
            default: read = ["TYPE", key]
            }
            lines.append("\(key) \(type) \(Self.flatten(try await redis.command(read)).joined(separator: " "))")
        }
        return lines.joined(separator: "\n")
    }

    private static func flatten(_ value: RedisValue) -> [String] {
        if let items = value.array { return items.flatMap(flatten) }
        return [value.string ?? value.integer.map(String.init) ?? ""]
    }

    /// Whether `secret` is in `text` as it is or inside a base64 token (how the inbox stores messages).
    static func reveals(_ text: String, _ secret: String) -> Bool {
        if text.contains(secret) { return true }
        let tokens = text.split(whereSeparator: { $0 == " " || $0 == "\"" || $0 == "\n" })
        return tokens.contains { token in
            guard token.count >= 16, let data = Data(base64Encoded: String(token)) else { return false }
            return data.range(of: Data(secret.utf8)) != nil
        }
    }
}
