import NIOCore
import SIMPClient
import SIMPLocalServers
import SIMPRedis
import SIMPTestSupport
import XCTest

/// A relay on a Redis as managed services run it: TLS with a client certificate and an ACL user.
final class ManagedRedisTests: XCTestCase {
    func testRelayRunsOnATLSRedisWithAnACLUser() async throws {
        let certificates = try await TestCertificates.make()
        addTeardownBlock { certificates.remove() }
        let port = try FreePort.tcp()
        let tls = RedisTLS(caFile: certificates.caFile, certificateFile: certificates.clientCertificate, keyFile: certificates.clientKey)
        let redis = try await RedisServerProcess.startPrivate(
            extraArguments: certificates.redisServerArguments(port: port, requireClientCertificate: true)
                + ["--user", "simp", "on", ">relay secret", "~simp:*", "&simp:*", "+@all", "-@admin", "--user", "default", "off"],
            port: port, user: "simp", password: "relay secret", tls: tls)
        let relay = try await TestRelay.start(redis: redis)
        addTeardownBlock { await relay.stop() }
        XCTAssertTrue("\(relay.server.configuration.redis)".hasPrefix("rediss://simp:***@127.0.0.1:"))

        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobClient = try await relay.connectClient(user: bob)
        let inbox = MessageInbox(bobClient)
        let aliceClient = try await relay.connectClient(user: alice)
        let result = try await aliceClient.send(text: "over TLS", to: bob)
        guard case .delivered = result else { return XCTFail("\(result)") }
        let arrived = await inbox.waitFor(1)
        XCTAssertTrue(arrived)
        let registered = try await relay.inspector.command(["EXISTS", "simp:user:{\(bob)}"])
        XCTAssertEqual(registered, .integer(1))
    }
}
