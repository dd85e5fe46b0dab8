import NIOCore
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

@testable import SIMPClient

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

    /// With or without the wait for others (10 ms by default), a burst read at once needs far
    /// fewer frames than messages; with no wait, one frame per read burst of up to 16. (The
    /// sender retransmits while the receiver is held, so the copies make the receipts urgent:
    /// they go at the end of each read burst either way; the wait itself is unit-tested.)
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
            XCTAssertGreaterThanOrEqual(frames, delay == .zero ? count / 16 : 1, "at most one frame per burst of up to 16 datagrams")
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

    /// A sender whose CONNECT does not say it reads batches (a client from
    /// before them) gets a batch from its receiver as single receipts, one per id.
    func testASenderThatDoesNotSayItReadsBatchesGetsSingleReceipts() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        for user in [alice, bob] { try await relay.addUser(user) }
        let oldSender = try await RawDevice(
            user: alice, password: TestRelay.password(for: alice), device: "old",
            acceptsBatchReceipts: false, controlPort: relay.port)
        let receiver = try await RawDevice(user: bob, password: TestRelay.password(for: bob), device: "phone", controlPort: relay.port)
        defer {
            Task {
                await oldSender.close(); await receiver.close()
            }
        }
        for id: UInt64 in 1...3 { try await oldSender.sendText(id, to: bob) }
        let arrived = try await Eventually.holds { try await receiver.messages().count == 3 }
        XCTAssertTrue(arrived)

        var batch = try await receiver.messages()[2].receipt(holdMicros: 0)
        batch.receiptIds = [1, 2]
        try await receiver.control.send([batch])
        let settled = try await Eventually.holds { try await oldSender.frames(.receipt).count >= 3 }
        XCTAssertTrue(settled)
        let receipts = try await oldSender.frames(.receipt)
        XCTAssertEqual(receipts.map(\.messageId), [3, 1, 2], "the batch's messageId first, then each other id")
        XCTAssertEqual(receipts.map(\.receiptIds), [[], [], []], "no batch reaches a sender that did not ask for them")
        XCTAssertEqual(receipts.map(\.attempt), [1, 0, 0])
    }
}
