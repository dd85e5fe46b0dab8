import NIOCore
import SIMPCore
import XCTest

/// A message its sender is still sending when later ones of its stream are stored must not be
/// skipped by the floor the relay raises when it hands the stored ones over
/// (docs/PROTOCOL.md §6.5, §6.6).
final class CustodyFloorTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
    private let wall: Int64 = 1_700_000_000_000

    private func text(_ content: String) -> SIMPMessage {
        SIMPMessage(kind: .text, fromUser: "alice", toUser: "bob", content: content)
    }

    private func storedReceipt(for message: SIMPMessage) -> SIMPMessage {
        var receipt = message.receipt(holdMicros: 0)
        receipt.status = .stored
        return receipt
    }

    private func entry(_ message: SIMPMessage, id: UInt64, floor: UInt64, custodyFloor: UInt64) -> InboxEntry {
        var message = message
        message.messageId = id
        message.stream = 900
        message.seq = id
        message.floor = floor
        message.custodyFloor = custodyFloor
        return InboxEntry(message: message, storedAt: wall - 1000)
    }

    /// simp-lab `fault-storm`, sim seed 153: #446's first datagram was lost 100 ms before the
    /// relay restarted; #447-#449 reached the receiver, which held them; after the restart the
    /// sender's resends of #447 on were stored (the receiver was not back yet) while #446's were
    /// lost again; the receiver came back and its backlog went out with a floor raised to 447,
    /// so it skipped #446 and got it last, after 23 later messages.
    func testAMessageStillBeingSentWhenLaterOnesAreStoredIsDeliveredBeforeThem() {
        var sender = ReliableSender(firstMessageId: 1, policy: .oneCopy)
        var receiver = ReceiverCore()
        var delivered: [UInt64] = []
        func arrive(_ message: SIMPMessage, at now: NIODeadline) {
            let outcome = receiver.receive(message, arrivedAt: now, now: now)
            delivered += outcome.deliver.map(\.seq)
            for receipt in outcome.receipts { _ = sender.handleReceipt(receipt, now: now) }
        }

        _ = sender.submit(text("#1"), now: t0) // lost
        for n in 2...3 {
            let sent = sender.submit(text("#\(n)"), now: t0 + .milliseconds(20 * Int64(n)))
            arrive(sent.output.transmit[0], at: t0 + .milliseconds(20 * Int64(n) + 25))
        }
        XCTAssertEqual(receiver.heldCount, 2, "#2 and #3 wait for #1")

        // The relay restarts: the sender's control connection is gone; #4-#8 are submitted meanwhile.
        sender.suspend()
        for n in 4...8 { _ = sender.submit(text("#\(n)"), now: t0 + .milliseconds(20 * Int64(n))) }
        // Back: everything unreceipted goes out again. #1 is lost again; the rest reach the relay
        // before the receiver is registered there, and are stored.
        let resumed = t0 + .seconds(2)
        let resent = sender.resume(now: resumed).transmit
        XCTAssertEqual(resent.map(\.seq), [1, 2, 3, 4, 5, 6, 7, 8])
        let log = resent.dropFirst().map { InboxEntry(message: $0, storedAt: wall - 1000) }
        for message in resent.dropFirst() { _ = sender.handleStored(storedReceipt(for: message), now: resumed + .milliseconds(50)) }

        // The receiver is back: the relay hands its backlog over as #1's sender, then #1 arrives.
        var inbox = InboxCore(retransmit: .oneCopy, ttlMillis: 60_000)
        let backlog = inbox.loaded(user: Recipient(user: "bob"), entries: log, wallNow: wall, now: resumed + .milliseconds(100))
        XCTAssertEqual(backlog.datagrams.map(\.message.floor), Array(repeating: 1, count: 7), "the sender still sends #1")
        for datagram in backlog.datagrams { arrive(datagram.message, at: resumed + .milliseconds(120)) }
        XCTAssertEqual(delivered, [], "nothing overtakes #1")

        var retry: [SIMPMessage] = []
        var now = resumed
        while retry.isEmpty, let deadline = sender.nextDeadline, deadline < resumed + .seconds(30) { // #1's timer
            now = deadline
            retry = sender.poll(now: now).transmit
        }
        XCTAssertEqual(retry.map(\.seq), [1])
        guard let resend = retry.first else { return }
        arrive(resend, at: now + .milliseconds(25))
        XCTAssertEqual(delivered, Array(1...8), "in order")
        XCTAssertEqual(receiver.deliveredLate, 0)
    }

    func testTheCustodyFloorPassesStoredSeqsButNotOneStillBeingSent() {
        var sender = ReliableSender(firstMessageId: 1, policy: .oneCopy)
        let sent = (1...3).map { sender.submit(text("#\($0)"), now: t0).output.transmit[0] }
        XCTAssertEqual(sent.map(\.custodyFloor), [1, 1, 1])
        _ = sender.handleStored(storedReceipt(for: sent[0]), now: t0 + .milliseconds(40))
        _ = sender.handleStored(storedReceipt(for: sent[2]), now: t0 + .milliseconds(40))
        let fourth = sender.submit(text("#4"), now: t0 + .milliseconds(50)).output.transmit[0]
        XCTAssertEqual([fourth.floor, fourth.custodyFloor], [1, 2], "#1 awaits its delivery from the log; #2 is still being sent")

        _ = sender.handleStored(storedReceipt(for: sent[1]), now: t0 + .milliseconds(60))
        XCTAssertTrue(sender.storedMessageSettled(sent[0].messageId, now: t0 + .milliseconds(70)))
        let fifth = sender.submit(text("#5"), now: t0 + .milliseconds(80)).output.transmit[0]
        XCTAssertEqual([fifth.floor, fifth.custodyFloor], [2, 4], "#2 and #3 stored, #4 in flight")
    }

    func testTheRelayRaisesTheFloorOfStoredEntriesNoHigherThanTheirCustodyFloor() {
        var inbox = InboxCore(retransmit: .oneCopy, ttlMillis: 60_000)
        // #1-#3 went through the log and reached the device (custody floor 4 on #5), #4 is
        // still being sent by alice: the entries skip #1-#3 and wait for #4.
        let entries = [
            entry(text("#5"), id: 5, floor: 1, custodyFloor: 4),
            entry(text("#6"), id: 6, floor: 1, custodyFloor: 4),
        ]
        let output = inbox.loaded(user: Recipient(user: "bob"), entries: entries, wallNow: wall, now: t0)
        XCTAssertEqual(output.datagrams.map(\.message.floor), [4, 4])
        // Stored by an older sender, which does not say: raised to the lowest seq, as before.
        var older = InboxCore(retransmit: .oneCopy, ttlMillis: 60_000)
        let unsaid = [entry(text("#5"), id: 5, floor: 1, custodyFloor: 0), entry(text("#6"), id: 6, floor: 1, custodyFloor: 0)]
        XCTAssertEqual(older.loaded(user: Recipient(user: "bob"), entries: unsaid, wallNow: wall, now: t0).datagrams.map(\.message.floor), [5, 5])
    }
}
