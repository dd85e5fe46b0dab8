import NIOCore
import SIMPClient
import SIMPCore
import XCTest

/// `ClientShell.carryOut`, the one interpreter of `ClientSession.Output` (ClientEngine's and
/// simp-lab's simulated client's): the order of the effects and what a shell is told.
final class ClientShellTests: XCTestCase {
    func testMessagesAreHandedOverBeforeTheirReceiptsAndAStoredMessageSettlesBeforeItsNotice() {
        let shell = RecordingShell()
        let message = SIMPMessage(kind: .text, messageId: 7, fromUser: "bob", toUser: "alice", content: "hi")
        var output = ClientSession.Output()
        output.delivered = [message]
        output.controlFrames = [SIMPMessage(kind: .receipt, messageId: 7, fromUser: "alice", toUser: "bob")]
        output.outcomes = [.delivered(messageId: 1, to: "bob", latency: .milliseconds(40), attempts: 2)]
        output.notices = [.stored(messageId: 2, to: "carol")]
        output.replies = [RequestReply(requestId: 9, result: .failure(.connectionLost))]
        output.reconnect = ReconnectPlan(attempt: 3, delay: .seconds(2))

        shell.carryOut(output)

        XCTAssertEqual(
            shell.events,
            [
                "take 7", "control receipt 7", "reported 1 outcomes",
                "settled delivered 1", "settled stored 2", "notice stored 2", "answered 9 connection lost",
                "reconnect 3 after 2000 ms", "timer nil",
            ])
    }

    func testAMessageTheApplicationHadAlreadyIsCountedAsNotTaken() {
        let shell = RecordingShell()
        shell.takes = false
        var output = ClientSession.Output()
        output.delivered = [SIMPMessage(kind: .text, messageId: 7, fromUser: "bob", toUser: "alice", content: "hi")]
        shell.carryOut(output)
        XCTAssertEqual(shell.events, ["take 7", "reported 0 outcomes", "timer nil"])
        XCTAssertEqual(shell.session.messagesTaken, 0)
    }
}

/// A shell that writes down each effect it is asked for.
private final class RecordingShell: ClientShell {
    var session = ClientSession(configuration: .init(user: "alice", firstMessageId: 1))
    var datagramAllocator: ByteBufferAllocator? { nil }
    var events: [String] = []
    var takes = true

    func take(_ message: SIMPMessage, allowance: Int?) -> Int {
        events.append("take \(message.messageId)")
        return takes ? 1 : 0
    }
    func sendDatagrams(_ datagrams: [ByteBuffer]) { events.append("datagrams \(datagrams.count)") }
    func writeControl(_ frames: [SIMPMessage]) { events += frames.map { "control \($0.kind) \($0.messageId)" } }
    func messageDelayed(_ message: DelayedMessage) { events.append("delayed \(message)") }
    func outputWillBeReported(_ output: ClientSession.Output) { events.append("reported \(output.outcomes.count) outcomes") }
    func messageSettled(_ result: SendResult) { events.append("settled \(Self.caseName(result)) \(result.messageId)") }
    func noticeArrived(_ notice: DeliveryNotice) {
        if case .stored(let id, "carol", _) = notice { return events.append("notice stored \(id)") }
        events.append("notice \(Self.caseName(notice))")
    }
    func peerEventArrived(_ event: PeerEvent) { events.append("peer \(event)") }
    func requestAnswered(_ requestId: UInt64, _ result: Result<[String], SIMPClientError>) {
        guard case .failure(.connectionLost) = result else { return events.append("answered \(requestId) other") }
        events.append("answered \(requestId) connection lost")
    }
    func closeControl() { events.append("close") }
    func reconnect(attempt: Int, after delay: TimeAmount) {
        events.append("reconnect \(attempt) after \(delay.nanoseconds / 1_000_000) ms")
    }
    func armTimer(at deadline: NIODeadline?) { events.append(deadline == nil ? "timer nil" : "timer set") }

    /// An enum value's case name, without its associated values.
    static func caseName(_ value: Any) -> String { String(String(describing: value).prefix { $0 != "(" }) }
}
