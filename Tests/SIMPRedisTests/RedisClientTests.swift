import NIOCore
import NIOPosix
import SIMPRedis
import SIMPTestSupport
import XCTest

/// The hiredis client against a real redis-server.
final class RedisClientTests: XCTestCase {
    var server: RedisServerProcess!
    var client: RedisClient!

    override func setUp() async throws {
        server = try await RedisServerProcess.start()
        client = RedisClient(url: server.url)
    }

    override func tearDown() async throws {
        await client.shutdown()
        await server.stop()
    }

    func testCommandsRoundTripBinarySafeValues() async throws {
        let key = "test:\(UInt32.random(in: .min ... .max))"
        let value = "line one\nline two \u{1F600} with spaces\r\n"
        let set = try await client.command(["SET", key, value, "EX", "30"])
        XCTAssertEqual(set, .status("OK"))
        let get = try await client.command(["GET", key])
        XCTAssertEqual(get, .string(value))
        let missing = try await client.command(["GET", key + ":missing"])
        XCTAssertEqual(missing, .null)
        let incremented = try await client.command(["INCRBY", key + ":n", "5"])
        XCTAssertEqual(incremented, .integer(5))
        _ = try await client.command(["DEL", key, key + ":n"])
    }

    func testPipelineIsOneRoundTripWithRepliesInOrder() async throws {
        let key = "test:list:\(UInt32.random(in: .min ... .max))"
        let before = client.roundTrips
        let replies = try await client.pipeline([["RPUSH", key, "a", "b"], ["LRANGE", key, "0", "-1"], ["DEL", key]])
        XCTAssertEqual(client.roundTrips - before, 1)
        XCTAssertEqual(replies, [.integer(2), .array([.string("a"), .string("b")]), .integer(1)])
    }

    func testErrorReplyIsAValueAndTheConnectionStaysUsable() async throws {
        let reply = try await client.command(["NOSUCHCOMMAND", "x"])
        guard case .error(let message) = reply else { return XCTFail("\(reply)") }
        XCTAssertTrue(message.contains("unknown command"), message)
        let ping = try await client.command(["PING"])
        XCTAssertEqual(ping, .status("PONG"))
    }

    func testFuturesCompleteOnTheCallersEventLoop() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let value = try await client.command(["PING"], on: loop).map { reply -> Bool in
            loop.inEventLoop && reply == .status("PONG")
        }.get()
        XCTAssertTrue(value)
    }

    func testDatabaseFromURLIsSelected() async throws {
        var url = server.url
        url.database = 3
        let db3 = RedisClient(url: url)
        defer { Task { await db3.shutdown() } }
        let key = "test:db:\(UInt32.random(in: .min ... .max))"
        _ = try await db3.command(["SET", key, "x", "EX", "30"])
        let inDB0 = try await client.command(["EXISTS", key])
        let inDB3 = try await db3.command(["EXISTS", key])
        XCTAssertEqual(inDB0, .integer(0))
        XCTAssertEqual(inDB3, .integer(1))
    }

    func testUnreachableServerGivesAReadableError() async throws {
        let nowhere = RedisClient(url: RedisURL(host: "127.0.0.1", port: try FreePort.tcp()), timeout: .milliseconds(300))
        defer { Task { await nowhere.shutdown() } }
        do {
            _ = try await nowhere.command(["PING"])
            XCTFail("PING to a closed port succeeded")
        } catch let error as RedisError {
            XCTAssertTrue(error.message.contains("cannot reach Redis"), error.message)
        }
    }
}

final class RedisURLTests: XCTestCase {
    func testParsesHostPortAndDatabase() throws {
        XCTAssertEqual(try RedisURL(parsing: "redis://10.0.0.5:6380/2"), RedisURL(host: "10.0.0.5", port: 6380, database: 2))
        XCTAssertEqual(try RedisURL(parsing: "redis://localhost"), RedisURL(host: "localhost", port: 6379, database: 0))
        XCTAssertEqual(try RedisURL(parsing: "redis://[::1]:7000"), RedisURL(host: "::1", port: 7000))
        XCTAssertEqual(RedisURL(host: "::1", port: 7000, database: 1).description, "redis://[::1]:7000/1")
    }

    func testRejectsWhatIsNotARedisURL() {
        for text in ["127.0.0.1:6379", "redis://", "redis://host:0", "redis://host:99999", "redis://host/x"] {
            XCTAssertThrowsError(try RedisURL(parsing: text), text)
        }
    }
}
