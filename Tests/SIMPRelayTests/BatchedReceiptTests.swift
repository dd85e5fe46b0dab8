import NIOCore
@testable import SIMPClient
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// Batch receipts end to end (docs/PROTOCOL.md §6.1), on a real redis-server and loopback
/// sockets: a receiver that reads a burst of datagrams receipts them in batches, and a receiver
/// that sends one receipt per message still works with the same relay and sender.
final class BatchedReceiptTests: RelayTestCase {
    private let count = 60

    /// Sends `count` messages from a new sender to `receiver` while the receiver's event loop is
    /// held for 300 ms, so they wait in its socket and are read in bursts; returns the sender's
    /// results and what the receiver's application got.
    private func burst(to receiver: SIMPClient, _ user: String, inbox: MessageInbox) async throws -> [SendResult] {
        let sender = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))
        let held = receiver.engine.eventLoop.submit { _ = usleep(300_000) }
        var results: [EventLoopFuture<SendResult>] = []
        for index in 0..<count {
            results.append(try await sender.submit(SIMPMessage(kind: .text, toUser: user, content: "burst \(index)")).result)
        }
        try await held.get()
        var outcomes: [SendResult] = []
        for result in results { outcomes.append(try await result.get()) }
        let arrived = await inbox.waitFor(count)
        let got = await inbox.messages.count
        XCTAssertTrue(arrived, "the receiver's application got \(got) of \(count)")
        return outcomes
    }

    private func assertAllDeliveredOnceInOrder(_ outcomes: [SendResult], _ inbox: MessageInbox) async {
        for outcome in outcomes {
            guard case .delivered = outcome else { return XCTFail("not delivered: \(outcome)") }
        }
        let contents = await inbox.messages.map(\.content)
        XCTAssertEqual(contents, (0..<count).map { "burst \($0)" }, "each once, in order")
    }

    /// By default a receipt waits up to 10 ms for others to the same sender, so a burst read
    /// at once needs very few frames; with no wait, one frame per read burst of up to 16.
    func testAReadBurstIsReceiptedInBatchesAndEveryMessageIsReportedDelivered() async throws {
        for delay in [ReceiptBatcher.defaultDelay, .zero] {
            let bob = TestRelay.uniqueUser("bob")
            let bobClient = try await relay.connectClient(user: bob) { $0.receiptBatchDelay = delay } // batches: the default
            XCTAssertTrue(bobClient.configuration.batchesReceipts)
            let inbox = MessageInbox(bobClient)
            let routedBefore = try await relay.server.statistics().receiptsRouted

            let outcomes = try await burst(to: bobClient, bob, inbox: inbox)

            await assertAllDeliveredOnceInOrder(outcomes, inbox)
            let frames = try await relay.server.statistics().receiptsRouted - routedBefore
            XCTAssertLessThanOrEqual(frames, count / 3, "receipt frames for \(count) messages read in bursts, delay \(delay)")
            if delay == .zero {
                XCTAssertGreaterThanOrEqual(frames, count / 16, "one frame per burst of at most 16 datagrams")
            } else {
                XCTAssertGreaterThanOrEqual(frames, 1)
                XCTAssertLessThan(frames, count / 16, "the 10 ms wait joins the bursts' receipts")
            }
            await bobClient.close()
        }
    }

    func testAReceiverThatSendsSingleReceiptsInteroperates() async throws {
        let bob = TestRelay.uniqueUser("bob")
        let bobClient = try await relay.connectClient(user: bob) { $0.batchesReceipts = false }
        let inbox = MessageInbox(bobClient)
        let routedBefore = try await relay.server.statistics().receiptsRouted

        let outcomes = try await burst(to: bobClient, bob, inbox: inbox)

        await assertAllDeliveredOnceInOrder(outcomes, inbox)
        let frames = try await relay.server.statistics().receiptsRouted - routedBefore
        XCTAssertGreaterThanOrEqual(frames, count, "one receipt frame per message")
    }
}
