import NIOCore
import SIMPCore
import XCTest

/// A receipt's datagram copy repeats the previous copy's ids to the same sender
/// (`ReceiptRepeater`, docs/PROTOCOL.md §6.1 "The datagram copy").
final class ReceiptRepeaterTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
    private func ms(_ value: Int64) -> NIODeadline { t0 + .milliseconds(value) }
    /// Room for any batch here; `256` leaves room for no id (`ClientSession.hasDatagramCopy`).
    private let roomy = 1400

    private func batch(_ id: UInt64, ids: [UInt64] = [], to sender: String = "alice") -> SIMPMessage {
        var message = SIMPMessage(kind: .text, messageId: id, fromUser: sender, toUser: "bob")
        message.attempt = 1
        var receipt = message.receipt(holdMicros: 0)
        receipt.receiptIds = ids
        return receipt
    }

    func testTheNextCopyRepeatsThePreviousCopysOwnIdsOnce() {
        var repeater = ReceiptRepeater()
        XCTAssertEqual(
            repeater.datagramCopy(of: batch(3, ids: [1, 2]), now: ms(0), maxDatagramSize: roomy).receiptIds, [1, 2],
            "nothing to repeat yet")
        let second = repeater.datagramCopy(of: batch(6, ids: [4, 5]), now: ms(20), maxDatagramSize: roomy)
        XCTAssertEqual(second.messageId, 6, "messageId, attempt and holdMicros stay the copy's own")
        XCTAssertEqual(second.receiptIds, [1, 2, 3, 4, 5])
        let third = repeater.datagramCopy(of: batch(7), now: ms(40), maxDatagramSize: roomy)
        XCTAssertEqual(third.receiptIds, [4, 5, 6], "only the previous copy's own ids: an id is repeated once")
    }

    func testOnlyARecentCopyToTheSameSenderIsRepeated() {
        var repeater = ReceiptRepeater(window: .milliseconds(100))
        _ = repeater.datagramCopy(of: batch(1), now: ms(0), maxDatagramSize: roomy)
        XCTAssertEqual(
            repeater.datagramCopy(of: batch(10, to: "carol"), now: ms(10), maxDatagramSize: roomy).receiptIds, [],
            "another sender's ids are not repeated")
        XCTAssertEqual(repeater.datagramCopy(of: batch(2), now: ms(100), maxDatagramSize: roomy).receiptIds, [1], "100 ms later: still repeated")
        XCTAssertEqual(repeater.datagramCopy(of: batch(3), now: ms(201), maxDatagramSize: roomy).receiptIds, [], "101 ms later: not")
    }

    func testACopyThatWouldNotFitOrCannotBeABatchGoesAsItIs() {
        var repeater = ReceiptRepeater()
        _ = repeater.datagramCopy(of: batch(1), now: ms(0), maxDatagramSize: roomy)
        XCTAssertEqual(
            repeater.datagramCopy(of: batch(2), now: ms(1), maxDatagramSize: 256).receiptIds, [],
            "the merged batch would not fit in a datagram")
        var held = batch(3)
        held.held = true
        XCTAssertEqual(repeater.datagramCopy(of: held, now: ms(2), maxDatagramSize: roomy), held, "a HELD batch would mark the repeats held")
        var room = batch(4)
        room.toUser = "#team"
        XCTAssertEqual(repeater.datagramCopy(of: room, now: ms(3), maxDatagramSize: roomy), room)
        XCTAssertEqual(
            repeater.datagramCopy(of: batch(5), now: ms(4), maxDatagramSize: roomy).receiptIds, [2],
            "the HELD one was not remembered: the previous copy is 2's")
    }

    /// The client's copies repeat, its control frames (reliable) do not; with a zero window or
    /// on a relay that does not route batches, copies carry only their own ids.
    func testAClientsDatagramCopyRepeatsItsPreviousBatch() {
        let keys = SessionKeys(sessionId: 1, secret: Array(repeating: 7, count: 32))
        for (window, relayBatches) in [(ReceiptRepeater.defaultWindow, true), (.zero, true), (ReceiptRepeater.defaultWindow, false)] {
            var configuration = ClientSession.Configuration(user: "bob", firstMessageId: 1)
            configuration.batchesReceipts = true
            configuration.receiptRepeatWindow = window
            var session = ClientSession(configuration: configuration)
            _ = session.registered(keys: keys, now: ms(0), relayBatchesReceipts: relayBatches)
            var frames: [SIMPMessage] = [], copies: [SIMPMessage] = []
            for id: UInt64 in 1...4 {
                var message = SIMPMessage(kind: .text, messageId: id, fromUser: "alice", toUser: "bob", content: "\(id)")
                message.attempt = 1
                let now = ms(Int64(id) * 10)
                for output in [session.datagramReceived(message, arrivedAt: now, now: now), session.flushReceipts(now: now)] {
                    frames += output.controlFrames
                    copies += output.datagrams
                }
            }
            XCTAssertEqual(frames.map(\.receiptIds), [[], [], [], []], "frames carry their own ids")
            if window > .zero, relayBatches {
                XCTAssertEqual(copies.map(\.receiptIds), [[], [1], [2], [3]])
            } else {
                XCTAssertEqual(copies.map(\.receiptIds), [[], [], [], []])
            }
            XCTAssertEqual(copies.map(\.messageId), [1, 2, 3, 4])
        }
    }
}
