import NIOCore
import SIMPCore
import XCTest

/// The client's datagram path (docs/PROTOCOL.md §5.5), with a virtual clock: HELLOs with no
/// answer over UDP move the datagrams into DATAGRAM frames on the control connection, UDP is
/// probed with backoff from there, and an answer over UDP brings them back.
final class DatagramPathTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    private let keys = SessionKeys(sessionId: 42, secret: Array(repeating: 7, count: 32))
    private var relay = DatagramSealer(keys: SessionKeys(sessionId: 42, secret: Array(repeating: 7, count: 32)), direction: .downlink)

    private func session(paths: DatagramPathPolicy? = DatagramPathPolicy()) -> ClientSession {
        var configuration = ClientSession.Configuration(user: "alice", firstMessageId: 100)
        configuration.heartbeat = HeartbeatPolicy(interval: .seconds(60), missLimit: 3) // out of the way
        configuration.keepaliveInterval = .seconds(10)
        configuration.pacing = nil
        configuration.datagramPaths = paths
        return ClientSession(configuration: configuration)
    }

    /// An output in one line: what goes where (datagrams by kind, id and attempt), and the rest.
    private func summary(_ output: ClientSession.Output) -> String {
        func name(_ message: SIMPMessage) -> String {
            message.kind.isContent ? "\(message.kind)#\(message.messageId)/\(message.attempt)" : "\(message.kind)"
        }
        var parts: [String] = []
        if !output.datagrams.isEmpty { parts.append("datagrams: " + output.datagrams.map(name).joined(separator: " ")) }
        if !output.udpProbes.isEmpty { parts.append("probes: " + output.udpProbes.map(name).joined(separator: " ")) }
        if !output.controlFrames.isEmpty { parts.append("frames: " + output.controlFrames.map(name).joined(separator: " ")) }
        if let path = output.pathChanged { parts.append("path: \(path)") }
        if !output.delivered.isEmpty { parts.append("delivered: " + output.delivered.map(\.content).joined(separator: " ")) }
        if !output.outcomes.isEmpty { parts.append("outcomes: \(output.outcomes.count)") }
        if output.closeControl { parts.append("close") }
        return parts.joined(separator: "; ")
    }

    private func answer(_ kind: SIMPMessage.Kind = .hello) -> ByteBuffer {
        relay.seal(SIMPMessage(kind: kind, toUser: "alice"))
    }

    /// A client that logged in at t0 with one message waiting, whose HELLOs get no answer; the
    /// message's receipt arrives over the control connection 10 ms after the switch at 1 s.
    private func blockedFromTheStart() -> (ClientSession, [String]) {
        var client = session()
        let id = client.submit(SIMPMessage(kind: .text, toUser: "bob", content: "hello"), now: t0).messageId
        var seen = [summary(client.registered(keys: keys, now: t0))]
        for ms in [250, 500, 750, 1000] { seen.append(summary(client.poll(now: t0 + .milliseconds(Int64(ms))))) }
        var receipt = SIMPMessage(kind: .receipt, messageId: id, fromUser: "bob", toUser: "alice")
        receipt.attempt = 2
        seen.append(summary(client.controlReceived(receipt, now: t0 + .milliseconds(1010))))
        return (client, seen)
    }

    func testNoHelloAnswerWithinASecondOfTheLoginMovesTheDatagramsToTheControlConnection() {
        let (client, seen) = blockedFromTheStart()

        XCTAssertEqual(
            seen,
            [
                "datagrams: hello text#100/1", "datagrams: hello", "datagrams: hello", "datagrams: hello",
                "datagrams: hello text#100/2; path: control", "outcomes: 1",
            ], "the HELLO over the control connection moves the relay too; the message goes again at once")
        XCTAssertEqual(client.datagramPath, .control)
        XCTAssertEqual(client.pathSwitches.toControl, 1)
    }

    func testTheControlPathProbesUDPWithBackoffAndComesBackWhenTheAnswerArrivesOverUDP() {
        var (client, _) = blockedFromTheStart()
        let switched = t0 + .seconds(1)
        var probes: [String] = []
        for offset in [1, 2, 3, 5, 7] { probes.append("\(offset): " + summary(client.poll(now: switched + .seconds(Int64(offset))))) }
        let overControl = client.controlReceived(.carrying(answer()), now: switched + .seconds(7))
        let overUDP = answerProbes(&client, from: switched + .seconds(7), polled: false)

        XCTAssertEqual(
            probes, ["1: probes: hello", "2: ", "3: probes: hello", "5: ", "7: probes: hello"], "after 1 s, then 2 s, then 4 s")
        XCTAssertEqual(summary(overControl), "", "an answer over the control connection proves nothing about UDP")
        XCTAssertEqual(
            overUDP, ["", "probes: hello", "", "probes: hello", "datagrams: ping; path: udp"],
            "three answers over UDP in a row, 250 ms apart; the PING, over UDP, moves the relay's side back")
        XCTAssertEqual(client.datagramPath, .udp)
    }

    /// On the control path: answers over UDP to the probe due at `start` (already sent unless
    /// `polled`) and to the two after it, 250 ms apart; what each poll and answer did.
    private func answerProbes(_ client: inout ClientSession, from start: NIODeadline, polled: Bool = true) -> [String] {
        var seen: [String] = []
        for index in 0..<3 {
            let now = start + .milliseconds(Int64(250 * index))
            if polled || index > 0 { seen.append(summary(client.poll(now: now))) }
            seen.append(summary(client.datagramArrived(answer(), arrivedAt: now, now: now)))
        }
        return seen
    }

    /// A network that answers one probe but not the next (heavy loss) stays on the control path.
    func testOneAnsweredProbeWithoutTheNextKeepsTheControlPath() {
        var (client, _) = blockedFromTheStart()
        let switched = t0 + .seconds(1)
        XCTAssertEqual(summary(client.poll(now: switched + .seconds(1))), "probes: hello")
        XCTAssertEqual(summary(client.datagramArrived(answer(), arrivedAt: switched + .seconds(1), now: switched + .seconds(1))), "")
        XCTAssertEqual(summary(client.poll(now: switched + .milliseconds(1250))), "probes: hello", "the confirming probe")

        XCTAssertEqual(summary(client.poll(now: switched + .milliseconds(1500))), "", "unanswered: no move")
        XCTAssertEqual(summary(client.poll(now: switched + .milliseconds(5400))), "")
        XCTAssertEqual(summary(client.poll(now: switched + .milliseconds(5500))), "probes: hello", "back on the backoff: 4 s later")
        XCTAssertEqual(client.datagramPath, .control)
        XCTAssertEqual(client.pathSwitches.toUDP, 0)
    }

    func testAnAnsweredLoginStaysOnUDPAndAKeepaliveIsAProbe() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        let answered = client.datagramArrived(answer(), arrivedAt: t0 + .milliseconds(1), now: t0 + .milliseconds(1))

        XCTAssertEqual(summary(answered), "")
        XCTAssertEqual(summary(client.poll(now: t0 + .seconds(10))), "datagrams: hello", "the keepalive: a probe, answered")
        XCTAssertEqual(summary(client.datagramArrived(answer(), arrivedAt: t0 + .seconds(10), now: t0 + .seconds(10))), "")
        XCTAssertEqual(summary(client.poll(now: t0 + .seconds(12))), "", "answered: no switch")
        XCTAssertEqual(client.datagramPath, .udp)
    }

    func testUDPFallingSilentAfterAStreamStartsAProbeRoundThatSwitchesWithoutAnAnswer() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        _ = client.datagramArrived(answer(), arrivedAt: t0, now: t0)
        var text = SIMPMessage(kind: .text, messageId: 7, fromUser: "bob", toUser: "alice", content: "one")
        text.attempt = 1
        let arrival = t0 + .seconds(2)
        let delivered = client.datagramArrived(relay.seal(text), arrivedAt: arrival, now: arrival)

        var seen: [String] = []
        for ms in [400, 500, 750, 1000, 1250, 1500] { seen.append(summary(client.poll(now: arrival + .milliseconds(Int64(ms))))) }

        XCTAssertEqual(summary(delivered), "datagrams: receipt; frames: receipt; delivered: one")
        XCTAssertEqual(
            seen, ["", "datagrams: hello", "datagrams: hello", "datagrams: hello", "datagrams: hello", "datagrams: hello; path: control"],
            "0.5 s of silence starts the round; 1 s without an answer ends it")
    }

    /// A datagram can still come over UDP while the control connection is down (the session's
    /// keys outlive it). The path waits for the next login then: nothing it would do may be due,
    /// or the engine, which polls at `nextDeadline`, polls again at once, forever (simp-lab
    /// `relay-restart` seed 7 spun so).
    func testADatagramArrivingWhileTheControlConnectionIsDownMakesNothingDueThatPollLeaves() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        _ = client.datagramArrived(answer(), arrivedAt: t0, now: t0)
        _ = client.controlLost(mayReconnect: false, random: 0)
        var text = SIMPMessage(kind: .text, messageId: 7, fromUser: "bob", toUser: "alice", content: "late")
        text.attempt = 1
        let arrival = t0 + .seconds(1)
        _ = client.datagramArrived(relay.seal(text), arrivedAt: arrival, now: arrival)

        let polled = arrival + .seconds(1)
        _ = client.poll(now: polled)
        if let due = client.nextDeadline { XCTAssertGreaterThan(due, polled, "a deadline that poll does not move is polled again at once") }
    }

    func testASentMessageWithNothingComingBackOverUDPStartsAProbeRound() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        _ = client.datagramArrived(answer(), arrivedAt: t0, now: t0)
        let sent = t0 + .seconds(3)
        let submitted = client.submit(SIMPMessage(kind: .text, toUser: "bob", content: "x"), now: sent)

        XCTAssertEqual(summary(submitted.output), "datagrams: text#100/1")
        XCTAssertEqual(summary(client.poll(now: sent + .milliseconds(500))), "datagrams: hello")
        XCTAssertEqual(summary(client.datagramArrived(answer(), arrivedAt: sent, now: sent + .milliseconds(501))), "")
        XCTAssertEqual(
            summary(client.poll(now: sent + .milliseconds(1500))), "datagrams: text#100/2 text#100/2",
            "answered: UDP works, and the message's retransmission goes over it")
        XCTAssertEqual(client.datagramPath, .udp)
    }

    func testADatagramFrameIsOpenedAsADatagramAndItsReceiptGoesTheSessionsWay() {
        var (client, _) = blockedFromTheStart()
        var text = SIMPMessage(kind: .text, messageId: 7, fromUser: "bob", toUser: "alice", content: "carried")
        text.attempt = 1
        let now = t0 + .seconds(1)

        let output = client.controlReceived(.carrying(relay.seal(text)), now: now)

        XCTAssertEqual(summary(output), "datagrams: receipt; frames: receipt; delivered: carried")
        XCTAssertEqual(client.datagramPath, .control, "the receipt's datagram copy goes in a DATAGRAM frame too (ClientShell)")
    }

    func testALoginOnTheControlPathSaysHelloOverItAndProbesUDPAtOnce() {
        var (client, _) = blockedFromTheStart()
        _ = client.controlLost(mayReconnect: true, random: 0.5)
        let again = t0 + .seconds(5)

        let registered = client.registered(keys: keys, now: again)

        XCTAssertEqual(summary(registered), "datagrams: hello; probes: hello")
        XCTAssertEqual(client.datagramPath, .control, "remembered: the network blocked UDP a moment ago")
    }

    func testComingBackAndFailingAgainKeepsTheLongerProbeInterval() {
        var (client, _) = blockedFromTheStart()
        let switched = t0 + .seconds(1)
        // The probe at 1 s and two more, answered: back on UDP (the next probe would have been 2 s later, then 4 s).
        XCTAssertEqual(answerProbes(&client, from: switched + .seconds(1)).last, "datagrams: ping; path: udp")
        let back = switched + .milliseconds(1500)
        _ = client.poll(now: back + .seconds(10)) // the keepalive round...
        let failed = client.poll(now: back + .seconds(11)) // ...unanswered

        XCTAssertEqual(summary(failed), "datagrams: hello; path: control", "nothing unreceipted to send again")
        XCTAssertEqual(summary(client.poll(now: back + .seconds(14))), "", "not after 1 s again")
        XCTAssertEqual(summary(client.poll(now: back + .seconds(15))), "probes: hello", "after 4 s: the interval it had reached")
        XCTAssertEqual(client.pathSwitches.toControl, 2)
        XCTAssertEqual(client.pathSwitches.toUDP, 1)
    }

    /// A client on UDP whose HELLO was answered at t0, then `attempts.count` messages from bob
    /// arriving over UDP 20 ms apart with those attempt numbers; what each poll at the arrival said.
    private func arrivals(_ attempts: [UInt32], into client: inout ClientSession, from start: NIODeadline) -> [String] {
        var seen: [String] = []
        for (index, attempt) in attempts.enumerated() {
            let now = start + .milliseconds(Int64(20 * index))
            var text = SIMPMessage(kind: .text, messageId: UInt64(1000 + index), fromUser: "bob", toUser: "alice", content: "m\(index)")
            text.attempt = attempt
            _ = client.datagramArrived(relay.seal(text), arrivedAt: now, now: now)
            seen.append(summary(client.poll(now: now)))
        }
        return seen
    }

    /// After `arrivals` tripped the heavy-loss count (and sent the loss check's first HELLO) 100 ms
    /// before `start`: polls every 100 ms from `start` to 0.9 s later (the check's other 4 HELLOs,
    /// then the rest of the 1 s for their answers), with an answer over UDP after the polls in
    /// `answered` (indices); what each poll said.
    private func lossCheck(_ client: inout ClientSession, from start: NIODeadline, answered: Set<Int> = []) -> [String] {
        var seen: [String] = []
        for index in 0...9 {
            let now = start + .milliseconds(Int64(100 * index))
            seen.append(summary(client.poll(now: now)))
            if answered.contains(index) { _ = client.datagramArrived(answer(), arrivedAt: now, now: now) }
        }
        return seen
    }

    /// 14 of 20 arrivals (70 %) retransmissions: heavy loss, or the sender's. The 20th starts a
    /// loss check, 5 HELLOs over UDP 100 ms apart; fewer than 2 answered within 1 s of the first:
    /// this client's UDP loses most datagrams, and they move to the control connection.
    func testHeavyLossOverUDPWithTheLossCheckUnansweredMovesTheDatagramsToTheControlConnection() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        _ = client.datagramArrived(answer(), arrivedAt: t0, now: t0)
        let lossy: [UInt32] = [2, 2, 1, 2, 2, 2, 1, 2, 2, 1, 2, 2, 2, 1, 2, 2, 1, 2, 1, 2]

        let seen = arrivals(lossy, into: &client, from: t0 + .milliseconds(100))
        let check = lossCheck(&client, from: t0 + .milliseconds(100 + 19 * 20 + 100), answered: [2])

        XCTAssertEqual(seen.dropLast().filter { $0.contains("path") }, [], "not before 20 outcomes")
        XCTAssertEqual(seen.last, "datagrams: hello", "the loss check's first HELLO")
        XCTAssertEqual(Array(check.prefix(4)), Array(repeating: "datagrams: hello", count: 4), "its other 4, 100 ms apart")
        XCTAssertEqual(check.dropLast().filter { $0.contains("path") }, [], "one answer is not enough to stay")
        XCTAssertEqual(check.last, "datagrams: hello; path: control", "1 s after the check's first HELLO")
        XCTAssertEqual(client.datagramPath, .control)
    }

    /// The flapping the first heavy-loss rule showed (`burst-loss`: 3–8 switches per run; the
    /// receiver in `udp-blocked`): 20 retransmitted arrivals, here every copy the sender resent
    /// when its own UDP failed, or a burst that is already over, while this client's UDP works.
    /// The loss check's HELLOs are answered: the datagrams stay on UDP (the first rule moved
    /// them at the 20th arrival and brought them back 3 probes later).
    func testRetransmissionsWhileTheClientsOwnUDPAnswersKeepTheDatagramsOnUDP() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        _ = client.datagramArrived(answer(), arrivedAt: t0, now: t0)
        let resent = t0 + .milliseconds(100)

        let seen = arrivals(Array(repeating: 2, count: 20), into: &client, from: resent)
        let check = lossCheck(&client, from: resent + .milliseconds(19 * 20 + 100), answered: [0, 1])

        XCTAssertEqual(seen.last, "datagrams: hello", "the loss check")
        XCTAssertEqual((seen + check).filter { $0.contains("path") }, [])
        XCTAssertEqual(client.datagramPath, .udp)
        XCTAssertEqual(client.pathSwitches.toControl, 0)
        XCTAssertEqual(
            arrivals(Array(repeating: 2, count: 19), into: &client, from: resent + .seconds(3)).filter { $0.contains("hello") }, [],
            "the count starts afresh after a check: 19 more outcomes start none")
    }

    /// 13 of 20 retransmissions (below the heavy-loss count), or 30 % loss over a longer stream,
    /// keep the datagrams on UDP: retransmissions repair such loss.
    func testModerateLossStaysOnUDP() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        _ = client.datagramArrived(answer(), arrivedAt: t0, now: t0)
        let thirteen: [UInt32] = [2, 2, 1, 2, 2, 2, 1, 2, 2, 1, 2, 2, 1, 1, 2, 2, 1, 2, 1, 2]
        let thirtyPercent = (0..<100).map { $0 % 10 >= 7 ? UInt32(2) : 1 }

        let seen = arrivals(thirteen + thirtyPercent, into: &client, from: t0 + .milliseconds(100))

        XCTAssertEqual(seen.filter { $0.contains("path") }, [])
        XCTAssertEqual(client.datagramPath, .udp)
    }

    /// Back on UDP after a move for heavy loss, the count starts afresh: 13 lost arrivals right
    /// after the return move nothing (a minimum dwell on UDP of 20 outcomes, no flapping).
    func testTheLossCountStartsAfreshOnTheReturnToUDP() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        _ = client.datagramArrived(answer(), arrivedAt: t0, now: t0)
        _ = arrivals(Array(repeating: 2, count: 20), into: &client, from: t0 + .milliseconds(100))
        _ = lossCheck(&client, from: t0 + .milliseconds(100 + 19 * 20 + 100))
        XCTAssertEqual(client.datagramPath, .control)
        let probe = t0 + .milliseconds(480 + 1000 + 1000)
        XCTAssertEqual(answerProbes(&client, from: probe).first, "probes: hello")
        XCTAssertEqual(client.datagramPath, .udp)

        let seen = arrivals(Array(repeating: 2, count: 13) + [1, 1, 1, 1, 1, 1], into: &client, from: probe + .milliseconds(520))

        XCTAssertEqual(seen.filter { $0.contains("path") }, [])
        XCTAssertEqual(client.pathSwitches.toControl, 1)
    }

    /// A sender whose receipts say most messages needed a retransmission checks, and moves too.
    func testASenderWhoseMessagesNeededRetransmissionsMovesToTheControlConnection() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        _ = client.datagramArrived(answer(), arrivedAt: t0, now: t0)
        let ids = (0..<20).map { client.submit(SIMPMessage(kind: .text, toUser: "bob", content: "x\($0)"), now: t0).messageId }
        _ = client.datagramArrived(answer(), arrivedAt: t0 + .milliseconds(500), now: t0 + .milliseconds(500)) // the quiet probe, answered
        let retransmitted = client.poll(now: t0 + .seconds(3))
        var receipt = SIMPMessage(kind: .receipt, messageId: ids[0], fromUser: "bob", toUser: "alice")
        receipt.receiptIds = Array(ids.dropFirst())
        receipt.attempt = 2
        let later = t0 + .milliseconds(3100)

        _ = client.controlReceived(receipt, now: later)

        XCTAssertTrue(summary(retransmitted).contains("text#100/2"), summary(retransmitted))
        XCTAssertEqual(summary(client.poll(now: later)), "datagrams: hello", "the loss check")
        XCTAssertEqual(
            summary(client.poll(now: later + .seconds(1))), "datagrams: hello; path: control", "its HELLOs unanswered")
    }

    func testWithoutTheFallbackHelloIsRepeatedAndTheKeepaliveIsAPing() {
        var client = session(paths: nil)
        _ = client.registered(keys: keys, now: t0)
        for ms in stride(from: 250, through: 4750, by: 250) {
            XCTAssertEqual(summary(client.poll(now: t0 + .milliseconds(Int64(ms)))), "datagrams: hello", "at \(ms) ms")
        }
        XCTAssertEqual(summary(client.poll(now: t0 + .seconds(5))), "", "20 HELLOs, then nothing")
        XCTAssertEqual(summary(client.poll(now: t0 + .seconds(10))), "datagrams: ping")
        XCTAssertEqual(client.datagramPath, .udp)
    }
}
