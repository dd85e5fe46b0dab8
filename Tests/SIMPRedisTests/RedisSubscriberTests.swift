import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SIMPRedis
import SIMPTestSupport
import XCTest

/// Pub/sub (SUBSCRIBE and SSUBSCRIBE) on a NIO connection against a real redis-server.
final class RedisSubscriberTests: XCTestCase {
    func testMessagesArriveOnTheGivenLoopInOrderWithBinaryPayloads() async throws {
        let server = try await RedisServerProcess.startPrivate()
        addTeardownBlock { await server.stop() }
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let received = NIOLockedValueBox<[(String, [UInt8], Bool)]>([])
        let subscriber = RedisSubscriber(url: server.url, channels: ["plain"], shardChannels: ["sharded"], eventLoop: loop) { channel, payload in
            received.withLockedValue { $0.append((channel, payload, loop.inEventLoop)) }
        }
        subscriber.start()
        try await subscriber.waitUntilSubscribed()
        let publisher = RedisClient(url: server.url)
        addTeardownBlock { await publisher.shutdown() }
        let binary: [UInt8] = [0, 1, 2, 13, 10, 255]
        var commands: [[[UInt8]]] = []
        for index in 0..<50 {
            commands.append([Array("PUBLISH".utf8), Array("plain".utf8), Array("p\(index)".utf8)])
            commands.append([Array("SPUBLISH".utf8), Array("sharded".utf8), binary + [UInt8(index)]])
        }
        let counts = try await publisher.pipeline(bytes: commands)
        XCTAssertEqual(counts, Array(repeating: .integer(1), count: 100))
        let all = await Eventually.holds { received.withLockedValue { $0.count } == 100 }
        XCTAssertTrue(all)
        let messages = received.withLockedValue { $0 }
        XCTAssertTrue(messages.allSatisfy { $0.2 }, "a message was delivered off the given loop")
        XCTAssertEqual(messages.filter { $0.0 == "plain" }.map { String(decoding: $0.1, as: UTF8.self) }, (0..<50).map { "p\($0)" })
        XCTAssertEqual(messages.filter { $0.0 == "sharded" }.map(\.1), (0..<50).map { binary + [UInt8($0)] })
        await subscriber.stop()
        _ = try await publisher.command(["PUBLISH", "plain", "after stop"])
        let nothingMore = await Eventually.stays { received.withLockedValue { $0.count } == 100 } // quiet period
        XCTAssertTrue(nothingMore, "\(received.withLockedValue { $0.count }) messages: one came after stop")
    }

    func testResubscribesAfterARedisRestart() async throws {
        let server = try await RedisServerProcess.startPrivate()
        addTeardownBlock { await server.stop() }
        let subscriptions = NIOLockedValueBox(0)
        let received = NIOLockedValueBox<[String]>([])
        let subscriber = RedisSubscriber(url: server.url, channels: ["c"], onSubscribed: { subscriptions.withLockedValue { $0 += 1 } }) {
            _, payload in
            received.withLockedValue { $0.append(String(decoding: payload, as: UTF8.self)) }
        }
        subscriber.start()
        try await subscriber.waitUntilSubscribed()
        try await server.restart()
        let again = await Eventually.holds { subscriptions.withLockedValue { $0 } == 2 }
        XCTAssertTrue(again, "no second subscription after the restart")
        let publisher = RedisClient(url: server.url)
        addTeardownBlock { await publisher.shutdown() }
        _ = try await publisher.command(["PUBLISH", "c", "after restart"])
        let heard = await Eventually.holds { received.withLockedValue { $0 } == ["after restart"] }
        XCTAssertTrue(heard)
        await subscriber.stop()
    }
}
