import Foundation
import NIOConcurrencyHelpers
import NIOCore
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

@testable import SIMPBench

/// The load generator against a real relay and Redis, at a rate any machine sustains.
final class LoadGeneratorTests: RelayTestCase {
    /// The bench's users have no passwords: it runs against development-mode relays.
    override func configureRelay(_ configuration: inout RelayConfiguration) {
        configuration.requireLogin = false
    }

    func testEveryOfferedMessageIsDeliveredOnceAndReceipted() async throws {
        // Receipts at the end of each read burst (--receipt-delay-ms 0).
        let result = try await run(batchesReceipts: true, receiptDelay: .zero)
        let stats = try await relay.server.statistics()
        XCTAssertLessThanOrEqual(stats.receiptsRouted, stats.datagramsForwarded, "batches: at most one receipt frame per message")
        XCTAssertGreaterThan(result.receiptFrames, 0)
    }

    func testSingleReceiptsAreOneFramePerMessage() async throws {
        let result = try await run(batchesReceipts: false, receiptDatagrams: false)
        let stats = try await relay.server.statistics()
        XCTAssertEqual(stats.datagramsForwarded, stats.receiptsRouted)
        XCTAssertEqual(result.receiptFrames, result.delivered)
    }

    func testReceiptDatagramsReachTheSendersAndSettleEachMessageOnce() async throws {
        let result = try await run(batchesReceipts: true)
        let stats = try await relay.server.statistics()
        XCTAssertGreaterThan(result.receiptDatagrams, 0, "a copy of every receipt frame")
        XCTAssertLessThanOrEqual(result.receiptDatagrams, result.receiptFrames)
        XCTAssertGreaterThan(result.receiptDatagramsArrived, 0, "the relay forwarded them to the senders")
        XCTAssertNil(stats.rejected[.receiptUnroutable])
        XCTAssertNil(stats.rejected[.senderMismatch])
        XCTAssertGreaterThan(stats.datagramsForwarded, stats.receiptsRouted, "messages and receipt copies")
        XCTAssertLessThanOrEqual(result.receiptsFirstByDatagram, result.receipts, "the second copy settles nothing")
    }

    func testWithoutReceiptDatagramsOnlyFramesCarryReceipts() async throws {
        let result = try await run(batchesReceipts: true, receiptDatagrams: false)
        XCTAssertEqual(result.receiptDatagrams, 0)
        XCTAssertEqual(result.receiptDatagramsArrived, 0)
        XCTAssertEqual(result.receiptsFirstByDatagram, 0)
    }

    func testTwoLoopsSplitThePairsAndMeasureOneWindow() async throws {
        let edges = NIOLockedValueBox<[Bool]>([])
        // 3 pairs over 2 loops: 2 + 1 pairs, offering 200 + 100 msg/s.
        let result = try await run(batchesReceipts: true, loops: 2) { starts in edges.withLockedValue { $0.append(starts) } }
        XCTAssertEqual(edges.withLockedValue { $0 }, [true, false], "one window for both loops")
        XCTAssertEqual(Double(result.offered), 150, accuracy: 15, "both loops offered their share for 0.5 s")
    }

    func testHeldReceiptsCoverSeveralMessagesPerFrame() async throws {
        // 100 msg/s per pair and receipts held up to 25 ms (§6.1's most): two or three messages per frame.
        let result = try await run(batchesReceipts: true, receiptDelay: .milliseconds(25))
        XCTAssertLessThan(result.receiptFrames * 2, result.delivered, "fewer than one frame per two messages")
    }

    /// `--tcp-path`: the pairs' datagrams go in DATAGRAM frames both ways, and arrive all, once,
    /// receipted (bench-compare's TCP-path pair).
    func testOnTheTCPPathEveryMessageGoesInFramesAndIsDeliveredOnce() async throws {
        let result = try await run(batchesReceipts: true, tcpPath: true)
        let stats = try await relay.server.statistics()
        XCTAssertGreaterThanOrEqual(stats.datagramsCarriedIn, result.offered, "every message came in a frame")
        XCTAssertGreaterThanOrEqual(stats.datagramsCarriedOut, result.delivered, "and went out in one")
        XCTAssertGreaterThan(result.receiptDatagramsArrived, 0, "receipt copies reach the senders in frames")
    }

    func testTicksOfSeveralMessagesAreDeliveredLikeSpreadOnes() async throws {
        _ = try await run(batchesReceipts: true, messagesPerTick: 8)
    }

    /// 3 pairs at 300 msg/s for half a second (receipts held the default 10 ms unless told):
    /// every message offered is delivered once and receipted.
    private func run(
        batchesReceipts: Bool, receiptDelay: TimeAmount = ReceiptBatcher.defaultDelay, receiptDatagrams: Bool = true,
        messagesPerTick: Int = 1, loops: Int = 1, tcpPath: Bool = false, atWindowEdge: @escaping @Sendable (Bool) -> Void = { _ in }
    ) async throws -> LoadResult {
        var parameters = LoadGenerator.Parameters()
        parameters.port = relay.port
        parameters.pairs = 3
        parameters.size = 200
        parameters.batchesReceipts = batchesReceipts
        parameters.receiptDelay = receiptDelay
        parameters.receiptDatagrams = receiptDatagrams
        parameters.messagesPerTick = messagesPerTick
        parameters.tcpPath = tcpPath
        let generator = ParallelLoad(parameters: parameters, loops: loops)
        XCTAssertEqual(generator.generators.map(\.parameters.pairs), loops == 2 ? [2, 1] : [3])
        XCTAssertEqual(generator.generators.map(\.parameters.firstPair), loops == 2 ? [0, 2] : [0])
        try await generator.connect()

        let result = try await generator.measure(
            rate: 300, duration: .milliseconds(500), warmup: .milliseconds(100),
            atWindowEdge: atWindowEdge)
        await generator.close()

        XCTAssertGreaterThan(result.offered, 100)
        XCTAssertEqual(result.failed, 0)
        XCTAssertEqual(result.unresolved, 0)
        XCTAssertEqual(result.duplicates, 0)
        XCTAssertEqual(result.latency.count, UInt64(result.offered), "every message offered in the window was delivered")
        XCTAssertEqual(result.receiptRTT.count, UInt64(result.offered), "and receipted")
        XCTAssertLessThanOrEqual(result.latency.summary.p50, result.receiptRTT.summary.max)
        return result
    }

    func testAFullWindowSkipsOffersInsteadOfQueueingThem() async throws {
        var parameters = LoadGenerator.Parameters()
        parameters.port = relay.port
        parameters.pairs = 1
        parameters.window = 1
        let generator = LoadGenerator(parameters: parameters)
        try await generator.connect()

        // About ten messages fall due per 50 µs tick, all for the one pair, and no receipt can come
        // back within a tick: after the first, the rest of each tick's messages are skipped.
        let result = try await generator.measure(rate: 200_000, duration: .milliseconds(300), warmup: .milliseconds(50))
        await generator.close()

        XCTAssertGreaterThan(result.skipped, 0)
        XCTAssertGreaterThan(result.offered, 0)
        XCTAssertEqual(result.failed, 0)
        XCTAssertEqual(result.latency.count, UInt64(result.offered), "what was offered was delivered")
    }

    func testDatagramsHaveTheRequestedSize() {
        let pair = BenchPair(index: 7, prefix: "bench-size", policy: .init(), receiptDelay: .zero)
        pair.sizeContent(toEncodedSize: 200)
        var message = SIMPMessage(
            kind: .text, messageId: WallClock.microsecondsSinceEpoch(), fromUser: pair.from,
            toUser: pair.to, content: pair.content, time: 0)
        message.attempt = 1
        XCTAssertEqual(
            Double(MessageCodec.encodedSize(of: message) + SealedDatagram.overhead), 200, accuracy: 8,
            "the sealed datagram on the wire")
    }
}

/// `simp-bench` as a user runs it: starts its own relay and Redis, prints one JSON object.
final class BenchCommandTests: XCTestCase {
    func testJSONRunWithItsOwnRelayReportsRatesLatencyAndRelayFigures() async throws {
        let bench = try ChildProcess("simp-bench", ["--pairs", "2", "--rate", "200", "--duration", "1", "--warmup", "0.2", "--json"])
        let status = await bench.exitStatus(timeout: 60)
        XCTAssertEqual(status, 0, bench.standardError)
        let object = try XCTUnwrap(
            JSONSerialization.jsonObject(with: Data(bench.standardOutput.utf8)) as? [String: Any],
            bench.standardOutput)
        XCTAssertGreaterThan(object["delivered_rate"] as? Double ?? 0, 100)
        XCTAssertEqual(object["failed"] as? Int, 0)
        let relay = try XCTUnwrap(object["relay"] as? [String: Any])
        XCTAssertGreaterThan(relay["peak_rss_bytes"] as? Int ?? 0, 0)
        XCTAssertNotNil(relay["cpu_seconds"] as? Double)
        XCTAssertGreaterThan(relay["forwarded"] as? Double ?? 0, 100)
        XCTAssertNotNil(relay["redis_round_trips_per_forwarded"] as? Double)
    }
}
