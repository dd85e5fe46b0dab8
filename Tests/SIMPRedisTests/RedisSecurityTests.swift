import NIOCore
import SIMPLocalServers
import SIMPRedis
import SIMPTestSupport
import XCTest

/// Logging in (requirepass, ACL users) and TLS against real redis-servers.
final class RedisSecurityTests: XCTestCase {
    func testRequirepassWithAPasswordOnlyURL() async throws {
        let server = try await LocalRedisServer.start(extraArguments: ["--requirepass", "s3cret pw"], password: "s3cret pw")
        addTeardownBlock { await server.stop() }
        let url = try RedisURL(parsing: "redis://:s3cret%20pw@127.0.0.1:\(server.url.port)")
        let client = RedisClient(url: url)
        addTeardownBlock { await client.shutdown() }
        let pong = try await client.command(["PING"])
        XCTAssertEqual(pong, .status("PONG"))

        let anonymous = RedisClient(url: RedisURL(host: "127.0.0.1", port: server.url.port))
        addTeardownBlock { await anonymous.shutdown() }
        let refused = try await anonymous.command(["GET", "x"])
        XCTAssertTrue(refused.errorMessage?.hasPrefix("NOAUTH") == true, "\(refused)")
    }

    func testACLUserAndDatabase() async throws {
        let server = try await LocalRedisServer.start(
            extraArguments: ["--user", "alice", "on", ">pa55", "~*", "&*", "+@all", "--user", "default", "off"], user: "alice", password: "pa55")
        addTeardownBlock { await server.stop() }
        let client = RedisClient(url: try RedisURL(parsing: "redis://alice:pa55@127.0.0.1:\(server.url.port)/2"))
        addTeardownBlock { await client.shutdown() }
        let whoami = try await client.command(["ACL", "WHOAMI"])
        XCTAssertEqual(whoami, .string("alice"))
        let info = try await client.command(["CLIENT", "INFO"])
        XCTAssertTrue(info.string?.contains(" db=2 ") == true, "\(info)")
    }

    func testWrongPasswordIsAReadableErrorWithoutThePassword() async throws {
        let server = try await LocalRedisServer.start(extraArguments: ["--requirepass", "right"], password: "right")
        addTeardownBlock { await server.stop() }
        let client = RedisClient(url: try RedisURL(parsing: "redis://:hunter2@127.0.0.1:\(server.url.port)"))
        addTeardownBlock { await client.shutdown() }
        do {
            _ = try await client.command(["PING"])
            XCTFail("a wrong password was accepted")
        } catch {
            XCTAssertTrue("\(error)".contains("refused AUTH"), "\(error)")
            XCTAssertTrue("\(error)".contains("WRONGPASS"), "\(error)")
            XCTAssertFalse("\(error)".contains("hunter2"), "\(error)")
        }
    }

    func testTLSWithACAFileAndAClientCertificate() async throws {
        let certificates = try await TestCertificates.make()
        addTeardownBlock { certificates.remove() } // runs last: stopping the server needs the files
        let port = try FreePort.tcp()
        let tls = RedisTLS(caFile: certificates.caFile, certificateFile: certificates.clientCertificate, keyFile: certificates.clientKey)
        let server = try await LocalRedisServer.start(
            port: port, extraArguments: certificates.redisServerArguments(port: port, requireClientCertificate: true), tls: tls)
        addTeardownBlock { await server.stop() }
        let text = "rediss://127.0.0.1:\(port)?ca=\(certificates.caFile)&cert=\(certificates.clientCertificate)&key=\(certificates.clientKey)"
        let client = RedisClient(url: try RedisURL(parsing: text))
        addTeardownBlock { await client.shutdown() }
        let replies = try await client.pipeline([["SET", "tls:test", "v"], ["GET", "tls:test"]])
        XCTAssertEqual(replies, [.status("OK"), .string("v")])

        let subscriber = RedisSubscriber(url: server.url, channels: ["tls:channel"]) { _, _ in }
        subscriber.start()
        try await subscriber.waitUntilSubscribed()
        await subscriber.stop()

        // Without the client certificate the server hangs up; with the system's roots the
        // client refuses the test CA's certificate.
        for url in [
            RedisURL(host: "127.0.0.1", port: port, tls: RedisTLS(caFile: certificates.caFile)),
            RedisURL(host: "127.0.0.1", port: port, tls: RedisTLS()),
        ] {
            let refused = RedisClient(url: url, timeout: .seconds(1))
            let reply = try? await refused.command(["PING"])
            XCTAssertNil(reply, "\(url)")
            await refused.shutdown()
        }
    }
}
