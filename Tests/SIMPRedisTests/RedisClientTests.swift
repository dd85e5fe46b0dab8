import NIOCore
import NIOPosix
import SIMPLocalServers
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
        addTeardownBlock { await db3.shutdown() }
        let key = "test:db:\(UInt32.random(in: .min ... .max))"
        _ = try await db3.command(["SET", key, "x", "EX", "30"])
        let inDB0 = try await client.command(["EXISTS", key])
        let inDB3 = try await db3.command(["EXISTS", key])
        XCTAssertEqual(inDB0, .integer(0))
        XCTAssertEqual(inDB3, .integer(1))
    }

    func testManyPipelinesInFlightAnswerInOrder() async throws {
        let key = "test:counter:\(UInt32.random(in: .min ... .max))"
        let loop = client.eventLoop
        let before = client.roundTrips
        // Issued back to back on the client's loop: all in flight at once on one connection.
        let replies = try await loop.flatSubmit { [client] in
            EventLoopFuture.whenAllSucceed((1...500).map { _ in client!.command(["INCR", key], on: loop) }, on: loop)
        }.get()
        XCTAssertEqual(replies, (1...500).map { RedisValue.integer(Int64($0)) })
        XCTAssertEqual(client.roundTrips - before, 500)
        _ = try await client.command(["DEL", key])
    }

    func testBinaryArgumentsAndPubSubPayloadsStayIntact() async throws {
        let payload = (0...255).map(UInt8.init) + [0, 13, 10, 36, 42]
        let key = "test:bytes:\(UInt32.random(in: .min ... .max))"
        let replies = try await client.pipeline(bytes: [
            [Array("SET".utf8), Array(key.utf8), payload], [Array("STRLEN".utf8), Array(key.utf8)],
            [Array("DEL".utf8), Array(key.utf8)],
        ])
        XCTAssertEqual(replies, [.status("OK"), .integer(Int64(payload.count)), .integer(1)])
    }

    func testUnreachableServerGivesAReadableError() async throws {
        let nowhere = RedisClient(url: RedisURL(host: "127.0.0.1", port: try FreePort.tcp()), timeout: .milliseconds(300))
        addTeardownBlock { await nowhere.shutdown() }
        do {
            _ = try await nowhere.command(["PING"])
            XCTFail("PING to a closed port succeeded")
        } catch let error as RedisError {
            XCTAssertTrue(error.message.contains("cannot reach Redis"), error.message)
            XCTAssertTrue(error.unavailable)
        }
    }

    func testAServerThatStopsAnsweringTimesOutAndTheClientRecovers() async throws {
        let slow = RedisClient(url: server.url, timeout: .milliseconds(300))
        addTeardownBlock { await slow.shutdown() }
        _ = try await slow.command(["PING"])
        _ = try await client.command(["CLIENT", "PAUSE", "800", "ALL"])
        do {
            _ = try await slow.command(["GET", "x"])
            XCTFail("a paused server answered")
        } catch {
            XCTAssertTrue("\(error)".contains("no reply within 300 ms"), "\(error)")
            XCTAssertEqual((error as? RedisError)?.unavailable, true)
        }
        let back = await Eventually.holds { (try? await slow.command(["PING"])) == .status("PONG") }
        XCTAssertTrue(back)
    }

    func testReconnectsAfterAnOutageAndLogsItOnceEachWay() async throws {
        let local = try await LocalRedisServer.start()
        let log = CapturedLog()
        let watcher = RedisClient(url: local.url, timeout: .milliseconds(300), logger: log.logger())
        addTeardownBlock { await watcher.shutdown() }
        let first = try await watcher.command(["PING"])
        XCTAssertEqual(first, .status("PONG"))
        await local.stop()
        var failures = 0
        for _ in 0..<20 {
            if (try? await watcher.command(["PING"])) == nil { failures += 1 }
            try await Task.sleep(nanoseconds: 25_000_000) // paced: 20 tries over 0.5 s of Redis being down
        }
        XCTAssertEqual(failures, 20)
        try await local.relaunch()
        addTeardownBlock { await local.stop() }
        let back = await Eventually.holds { (try? await watcher.command(["PING"])) == .status("PONG") }
        XCTAssertTrue(back, "the client did not reconnect")
        let warnings = log.texts(atLeast: .warning).filter { $0.contains("unreachable") }
        let notices = log.texts(atLeast: .notice).filter { $0.contains("reachable again") }
        XCTAssertEqual(warnings.count, 1, "\(log.texts())")
        XCTAssertEqual(notices.count, 1, "\(log.texts())")
    }
}
