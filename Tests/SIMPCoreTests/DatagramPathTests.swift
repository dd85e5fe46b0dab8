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
        let overUDP = client.datagramArrived(answer(), arrivedAt: switched + .seconds(7), now: switched + .seconds(7))

        XCTAssertEqual(
            probes, ["1: probes: hello", "2: ", "3: probes: hello", "5: ", "7: probes: hello"], "after 1 s, then 2 s, then 4 s")
        XCTAssertEqual(summary(overControl), "", "an answer over the control connection proves nothing about UDP")
        XCTAssertEqual(summary(overUDP), "datagrams: ping; path: udp", "the PING, over UDP, moves the relay's side back")
        XCTAssertEqual(client.datagramPath, .udp)
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
        _ = client.poll(now: switched + .seconds(1)) // probe; the next one would be 2 s later, then 4 s
        _ = client.datagramArrived(answer(), arrivedAt: switched + .seconds(1), now: switched + .seconds(1)) // back on UDP
        let back = switched + .seconds(1)
        _ = client.poll(now: back + .seconds(10)) // the keepalive round...
        let failed = client.poll(now: back + .seconds(11)) // ...unanswered

        XCTAssertEqual(summary(failed), "datagrams: hello; path: control", "nothing unreceipted to send again")
        XCTAssertEqual(summary(client.poll(now: back + .seconds(14))), "", "not after 1 s again")
        XCTAssertEqual(summary(client.poll(now: back + .seconds(15))), "probes: hello", "after 4 s: the interval it had reached")
        XCTAssertEqual(client.pathSwitches.toControl, 2)
        XCTAssertEqual(client.pathSwitches.toUDP, 1)
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
