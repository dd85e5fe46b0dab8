import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// The relay forwards file datagrams (docs/PROTOCOL.md §5.6) without reading them, under a
/// budget of their own.
final class RelayCoreFileTests: XCTestCase {
    private let c1 = ConnectionID(1), c2 = ConnectionID(2)

    private func relay(fileLimit: RateLimit = RelayCore.Configuration.defaultFileLimit) throws -> DevRelay {
        var relay = DevRelay { $0.fileLimit = fileLimit }
        try relay.connect("alice", on: c1, port: 5555)
        try relay.connect("bob", on: c2, port: 6666)
        return relay
    }

    func testAChunkAndItsAcknowledgementAreForwardedAsSent() throws {
        var relay = try relay()
        let chunk = SIMPMessage.fileChunk([9, 9, 9], index: 4, number: 7, fileId: 99, from: "alice", to: "bob")
        XCTAssertEqual(relay.send(chunk), [relay.delivery(chunk, to: "bob")])
        var ack = SIMPMessage(kind: .fileAck, fromUser: "bob", toUser: "alice")
        ack.fileId = 99
        ack.fileRanges = [0, 5]
        XCTAssertEqual(relay.send(ack), [relay.delivery(ack, to: "alice")])
    }

    func testFilesHaveTheirOwnBudgetAndChatIsNotStarved() throws {
        var relay = try relay(fileLimit: RateLimit(perSecond: 1, burst: 2))
        let chunk = SIMPMessage.fileChunk([1], index: 0, number: 1, fileId: 99, from: "alice", to: "bob")
        XCTAssertEqual(try relay.delivered(to: "bob", in: relay.send(chunk)).count, 1)
        XCTAssertEqual(try relay.delivered(to: "bob", in: relay.send(chunk)).count, 1)
        XCTAssertEqual(relay.send(chunk), [.reject(.fileRateLimited, detail: "alice")])
        // The message rate is untouched: chat goes on while the file budget is spent.
        let text = SIMPMessage(kind: .text, messageId: 1, fromUser: "alice", toUser: "bob", content: "hi")
        XCTAssertEqual(try relay.delivered(to: "bob", in: relay.send(text)).map(\.content), ["hi"])
    }

    func testAForgedSenderIsDroppedAndNothingIsStoredForAnOfflineUser() throws {
        var relay = try relay()
        let forged = SIMPMessage.fileChunk([1], index: 0, number: 1, fileId: 99, from: "bob", to: "alice")
        var aliceSealer = relay.clients["alice"]!.sealer
        let bytes = aliceSealer.seal(forged) // alice's session, claiming to be bob
        XCTAssertEqual(
            relay.datagram(bytes, from: relay.clients["alice"]!.address),
            [.reject(.senderMismatch, detail: "alice's session sent a fileChunk from \"bob\"")])
        _ = relay.closed(c2)
        let toOffline = SIMPMessage.fileChunk([1], index: 0, number: 2, fileId: 99, from: "alice", to: "bob")
        let actions = relay.send(toOffline)
        XCTAssertFalse(actions.contains { if case .store(.storeInInbox) = $0 { return true } else { return false } }, "\(actions)")
    }
}
