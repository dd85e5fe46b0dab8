import NIOCore
import SIMPCore
import XCTest

/// Batch receipts (docs/PROTOCOL.md §6.1): the wire form, the receiver's batches, the sender's
/// handling of them (delivery, RTT sample, fast retransmit) and malformed batches.
final class BatchReceiptTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
    private func ms(_ value: Int64) -> NIODeadline { t0 + .milliseconds(value) }

    private func receipt(for id: UInt64, attempt: UInt32 = 1, hold: UInt32 = 0, from receiver: String = "bob") -> SIMPMessage {
        var message = SIMPMessage(kind: .text, messageId: id, fromUser: "alice", toUser: receiver)
        message.attempt = attempt
        return message.receipt(holdMicros: hold)
    }

    private func batch(_ id: UInt64, attempt: UInt32 = 1, hold: UInt32 = 0, ids: [UInt64], from receiver: String = "bob") -> SIMPMessage {
        var batch = receipt(for: id, attempt: attempt, hold: hold, from: receiver)
        batch.receiptIds = ids
        return batch
    }

    // MARK: Wire

    func testTheDocumentedExampleEncodesIdsAsDifferences() throws {
        let bytes = Array(MessageCodec.encode(batch(1005, hold: 40, ids: [1000, 1001, 1002])).readableBytesView)
        let field50: [UInt8] = [0x92, 0x03, 0x04, 0xe8, 0x07, 0x01, 0x01]
        XCTAssertNotNil(bytes.indices.first { bytes[$0...].starts(with: field50) }, "\(bytes)")
        XCTAssertEqual(try MessageCodec.decode(ByteBuffer(bytes: bytes)).receiptIds, [1000, 1001, 1002])
    }

    func testLargeAndSparseIdsRoundTrip() throws {
        let ids: [UInt64] = [1, 2, 1 << 40, (1 << 62) + 7, .max]
        XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(batch(3, ids: ids))).receiptIds, ids)
    }

    /// Field 50 written by hand: `deltas` as packed varints after a RECEIPT's version and type.
    private func decodeBatch(deltas: [UInt64]) throws -> SIMPMessage {
        var payload: [UInt8] = []
        for var value in deltas {
            while value >= 0x80 { payload.append(UInt8(value & 0x7f) | 0x80); value >>= 7 }
            payload.append(UInt8(value))
        }
        var length: [UInt8] = []
        var count = payload.count
        while count >= 0x80 { length.append(UInt8(count & 0x7f) | 0x80); count >>= 7 }
        length.append(UInt8(count))
        let bytes: [UInt8] = [0x08, 0x01, 0x10, 0x05, 0x40, 0x04, 0x92, 0x03] + length + payload
        return try MessageCodec.decode(ByteBuffer(bytes: bytes))
    }

    func testMalformedBatchesDoNotDecode() throws {
        XCTAssertEqual(try decodeBatch(deltas: [10, 1, 1]).receiptIds, [10, 11, 12])
        for (deltas, why) in [
            ([10, 0, 1], "an id twice"), ([0, 1], "id 0"), ([.max, 1], "past 2^64 - 1"),
            (Array(repeating: 1, count: SIMPMessage.maxReceiptIds + 1), "too many ids"),
        ] as [([UInt64], String)] {
            XCTAssertThrowsError(try decodeBatch(deltas: deltas), why) { XCTAssertEqual($0 as? DecodeError, .invalidReceiptIds, why) }
        }
        XCTAssertEqual(try decodeBatch(deltas: Array(repeating: 1, count: SIMPMessage.maxReceiptIds)).receiptIds.count, SIMPMessage.maxReceiptIds)
    }

    func testAHugeGapCostsNoMoreThanItsBytes() throws {
        // Two ids 2^63 apart: decoding reads two varints and expands nothing.
        XCTAssertEqual(try decodeBatch(deltas: [1, 1 << 63]).receiptIds, [1, (1 << 63) + 1])
    }

    // MARK: Receiver

    func testABatchPerSenderWithTheNewestReceiptAndItsWaitInTheHold() {
        var batcher = ReceiptBatcher(delay: .milliseconds(1))
        XCTAssertNil(batcher.add(receipt(for: 12, from: "bob"), now: ms(0)))
        var fromCarol = receipt(for: 500, from: "bob")
        fromCarol.toUser = "carol"
        XCTAssertNil(batcher.add(fromCarol, now: ms(0)))
        XCTAssertNil(batcher.add(receipt(for: 10, from: "bob"), now: ms(0)))
        XCTAssertNil(batcher.add(receipt(for: 12, from: "bob"), now: ms(0))) // a duplicate's receipt
        XCTAssertNil(batcher.add(receipt(for: 11, attempt: 2, hold: 30, from: "bob"), now: ms(0)))
        XCTAssertEqual(batcher.nextDeadline, ms(1))

        let frames = batcher.flush(now: ms(0) + .microseconds(70))
        XCTAssertEqual(frames.map(\.toUser), ["alice", "carol"], "one per sender, in the order they started")
        XCTAssertEqual(frames[0].messageId, 11, "the newest carries the sample")
        XCTAssertEqual(frames[0].attempt, 2)
        XCTAssertEqual(frames[0].holdMicros, 100, "30 µs held plus 70 µs in the batch")
        XCTAssertEqual(frames[0].receiptIds, [10, 12])
        XCTAssertEqual(frames[1].messageId, 500)
        XCTAssertEqual(frames[1].receiptIds, [])
        XCTAssertTrue(batcher.isEmpty)
        XCTAssertNil(batcher.nextDeadline)
    }

    func testAFullBatchGoesAtOnce() {
        var batcher = ReceiptBatcher(maxIds: 3)
        for id: UInt64 in 1...3 { XCTAssertNil(batcher.add(receipt(for: id), now: ms(0))) }
        let full = batcher.add(receipt(for: 4), now: ms(0))
        XCTAssertEqual(full?.messageId, 4)
        XCTAssertEqual(full?.receiptIds, [1, 2, 3])
        XCTAssertTrue(batcher.isEmpty)
    }

    func testOnlyAReceiversDeliveredReceiptsToUsersAreBatchable() {
        XCTAssertTrue(ReceiptBatcher.isBatchable(receipt(for: 1)))
        var stored = receipt(for: 1)
        stored.status = .stored
        var roomCopy = receipt(for: 1)
        roomCopy.toUser = "#lobby"
        XCTAssertFalse(ReceiptBatcher.isBatchable(stored))
        XCTAssertFalse(ReceiptBatcher.isBatchable(roomCopy))
        XCTAssertFalse(ReceiptBatcher.isBatchable(batch(2, ids: [1])))
        XCTAssertFalse(ReceiptBatcher.isBatchable(SIMPMessage(kind: .ping)))
    }

    /// A client batches only when configured to and when its relay's CONNECTED says the relay
    /// routes batches (an older relay would drop the ids).
    func testAClientBatchesOnlyOnARelayThatRoutesBatches() {
        let keys = SessionKeys(sessionId: 1, secret: Array(repeating: 7, count: 32))
        for relayBatches in [false, true] {
            var configuration = ClientSession.Configuration(user: "bob", firstMessageId: 1)
            configuration.batchesReceipts = true
            configuration.receiptDatagrams = false
            var session = ClientSession(configuration: configuration)
            _ = session.registered(keys: keys, now: ms(0), relayBatchesReceipts: relayBatches)
            var frames: [SIMPMessage] = []
            for id: UInt64 in 1...3 {
                var message = SIMPMessage(kind: .text, messageId: id, fromUser: "alice", toUser: "bob", content: "\(id)")
                message.attempt = 1
                frames += session.datagramReceived(message, arrivedAt: ms(1), now: ms(1)).controlFrames
            }
            frames += session.flushReceipts(now: ms(1)).controlFrames
            if relayBatches {
                XCTAssertEqual(frames.map(\.messageId), [3])
                XCTAssertEqual(frames.first?.receiptIds, [1, 2])
            } else {
                XCTAssertEqual(frames.map(\.messageId), [1, 2, 3], "single receipts to a relay without batches")
            }
            XCTAssertEqual(session.receiptFramesSent, frames.count)
        }
    }

    /// By default a receipt waits up to `ReceiptBatcher.defaultDelay` for others to the same
    /// sender: the end of a read burst sends nothing, `poll` at the deadline sends one batch per
    /// sender covering every message of the wait, its hold time including the wait. With a
    /// delay of zero the burst's end sends them, as clients did before the delay.
    func testReceiptsWaitForOthersUpToTheDelayUnlessItIsZero() {
        let keys = SessionKeys(sessionId: 1, secret: Array(repeating: 7, count: 32))
        for delay in [ReceiptBatcher.defaultDelay, .zero] {
            var configuration = ClientSession.Configuration(user: "bob", firstMessageId: 1)
            configuration.batchesReceipts = true
            configuration.receiptDatagrams = false
            configuration.receiptBatchDelay = delay
            var session = ClientSession(configuration: configuration)
            _ = session.registered(keys: keys, now: ms(0), relayBatchesReceipts: true)
            var frames: [SIMPMessage] = []
            for (id, sender) in [(UInt64(1), "alice"), (2, "carol"), (3, "alice")] {
                var message = SIMPMessage(kind: .text, messageId: id, fromUser: sender, toUser: "bob", content: "\(id)")
                message.attempt = 1
                frames += session.datagramReceived(message, arrivedAt: ms(Int64(id)), now: ms(Int64(id))).controlFrames
                frames += session.datagramBurstEnded(now: ms(Int64(id))).controlFrames
            }
            guard delay > .zero else {
                XCTAssertEqual(frames.map(\.messageId), [1, 2, 3], "a zero delay sends each burst's receipts at its end")
                continue
            }
            XCTAssertEqual(frames, [], "receipts wait for others")
            XCTAssertEqual(session.nextDeadline, ms(1) + delay, "the oldest receipt bounds the wait")
            frames += session.poll(now: ms(1) + delay - .nanoseconds(1)).controlFrames
            XCTAssertEqual(frames, [])
            frames += session.poll(now: ms(1) + delay).controlFrames
            XCTAssertEqual(frames.map(\.toUser), ["alice", "carol"], "one batch per sender")
            XCTAssertEqual(frames.first?.messageId, 3)
            XCTAssertEqual(frames.first?.receiptIds, [1])
            XCTAssertEqual(frames.first?.holdMicros, UInt32((delay - .milliseconds(2)).nanoseconds / 1000), "message 3 waited delay - 2 ms")
            XCTAssertFalse(session.hasBatchedReceipts)
        }
    }

    /// An arrival that says something was lost (a retransmission, a duplicate, one held behind
    /// a gap) sends every waiting receipt at the end of its read burst: its sender is waiting.
    func testAnArrivalThatSuggestsLossSendsTheWaitingReceiptsAtOnce() {
        let keys = SessionKeys(sessionId: 1, secret: Array(repeating: 7, count: 32))
        func text(_ id: UInt64, seq: UInt64, attempt: UInt32) -> SIMPMessage {
            var message = SIMPMessage(kind: .text, messageId: id, fromUser: "alice", toUser: "bob", content: "\(id)")
            message.attempt = attempt
            message.stream = 1
            message.seq = seq
            message.floor = 1
            return message
        }
        let cases: [(String, [SIMPMessage])] = [
            ("a retransmission", [text(1, seq: 1, attempt: 1), text(2, seq: 2, attempt: 2)]),
            ("a duplicate", [text(1, seq: 1, attempt: 1), text(1, seq: 1, attempt: 1)]),
            ("one held behind a gap", [text(1, seq: 1, attempt: 1), text(3, seq: 3, attempt: 1)]),
        ]
        for (what, arrivals) in cases {
            var configuration = ClientSession.Configuration(user: "bob", firstMessageId: 1)
            configuration.batchesReceipts = true
            configuration.receiptDatagrams = false
            var session = ClientSession(configuration: configuration)
            _ = session.registered(keys: keys, now: ms(0), relayBatchesReceipts: true)
            var first = session.datagramReceived(arrivals[0], arrivedAt: ms(1), now: ms(1)).controlFrames
            first += session.datagramBurstEnded(now: ms(1)).controlFrames
            XCTAssertEqual(first, [], "a plain first arrival's receipt waits")
            var second = session.datagramReceived(arrivals[1], arrivedAt: ms(2), now: ms(2)).controlFrames
            second += session.datagramBurstEnded(now: ms(2)).controlFrames
            XCTAssertTrue(second.contains { $0.messageId == 1 || $0.receiptIds.contains(1) }, "\(what): message 1's receipt goes at the burst's end")
            XCTAssertFalse(session.hasBatchedReceipts, what)
        }
    }

    // MARK: Sender

    private func sender(messages count: Int, to receivers: [String] = ["bob"]) -> (ReliableSender, [UInt64]) {
        var sender = ReliableSender(firstMessageId: 100, policy: .oneCopy)
        let ids = (0..<count).map { index in
            let user = receivers[index % receivers.count]
            return sender.submit(SIMPMessage(kind: .text, fromUser: "alice", toUser: user, content: "m\(index)"), now: ms(Int64(index))).messageId
        }
        return (sender, ids)
    }

    func testABatchDeliversEveryIdAndSamplesRTTFromItsMessageId() {
        var (sender, ids) = sender(messages: 4)
        let output = sender.handleReceipt(batch(ids[3], hold: 2_000, ids: [ids[0], ids[1], ids[2]]), now: ms(23))
        XCTAssertEqual(Set(output.events.map(\.messageId)), Set(ids))
        XCTAssertEqual(sender.inFlightCount, 0)
        // Sent at 3 ms, receipted at 23 ms after a 2 ms hold: one sample of 18 ms.
        XCTAssertEqual(sender.estimator.smoothedRTT, .milliseconds(18))
        XCTAssertEqual(output.transmit, [], "nothing was overtaken")
    }

    func testABatchOvertakesAMissingMessageAndFastRetransmitsIt() {
        var (sender, ids) = sender(messages: 4)
        // ids[0] was lost; the batch covers the three sent after it.
        let output = sender.handleReceipt(batch(ids[3], ids: [ids[1], ids[2]]), now: ms(30))
        XCTAssertEqual(output.transmit.map(\.messageId), [ids[0]])
        XCTAssertEqual(output.transmit.first?.attempt, 2)
        XCTAssertEqual(sender.fastRetransmits, 1)
    }

    func testOneLaterMessageInABatchIsBelowTheThreshold() {
        var (sender, ids) = sender(messages: 3)
        XCTAssertEqual(sender.handleReceipt(batch(ids[1], ids: []), now: ms(30)).transmit, [])
        XCTAssertEqual(sender.fastRetransmits, 0)
        XCTAssertTrue(sender.isPending(ids[0]))
    }

    func testIdsNotInFlightRepeatedOrForAnotherReceiverAreIgnored() {
        var (sender, ids) = sender(messages: 4, to: ["bob", "carol"])
        // bob's batch names carol's messages (ids[1], ids[3]), unknown ids and ids[2] twice.
        let output = sender.handleReceipt(batch(ids[2], ids: [1, ids[1], ids[3], 99_999, ids[2]]), now: ms(20))
        XCTAssertEqual(output.events.map(\.messageId), [ids[2]])
        XCTAssertTrue(sender.isPending(ids[1]))
        XCTAssertTrue(sender.isPending(ids[3]))
        XCTAssertTrue(sender.isPending(ids[0]))
        // A batch whose messageId is not in flight still delivers its ids, without a sample.
        let late = sender.handleReceipt(batch(ids[2], ids: [ids[0]]), now: ms(25))
        XCTAssertEqual(late.events.map(\.messageId), [ids[0]])
        XCTAssertEqual(sender.estimator.smoothedRTT, .milliseconds(18), "only the first batch's sample")
    }

    func testASingleReceiptStillWorksAsABatchOfOne() {
        var (sender, ids) = sender(messages: 1)
        let output = sender.handleReceipt(receipt(for: ids[0]), now: ms(5))
        XCTAssertEqual(output.events.map(\.messageId), ids)
        XCTAssertEqual(sender.estimator.smoothedRTT, .milliseconds(5))
    }
}

extension SenderEvent {
    fileprivate var messageId: UInt64 {
        switch self {
        case .delivered(let id, _, _, _), .failed(let id, _, _): id
        }
    }
}
