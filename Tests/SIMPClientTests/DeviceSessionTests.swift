import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// Devices, send-only sessions and the outbox against a real relay and Redis: in-process
/// clients, and `simp` run as a user runs it.
final class DeviceSessionTests: ClientHomeTestCase {
    var server: String { "127.0.0.1:\(relay.port)" }

    func testAuthAndConnectNameTheDeviceAndSendOnlySessionsSaySo() async throws {
        let tap = try await TCPTap.start(target: relay.server.controlAddress!)
        let alice = TestRelay.uniqueUser("alice")
        let client = try await relay.connectClient(user: alice) {
            $0.serverPort = tap.address.port!
            $0.device = "desk-1"
            $0.sendOnly = true
        }
        var wire = ByteBuffer(bytes: tap.recorded)
        var frames: [SIMPMessage] = []
        while let frame = try Framing.nextFrame(in: &wire, maxFrameSize: 1 << 16) { frames.append(try MessageCodec.decode(frame)) }
        let auth = frames.first { $0.kind == .auth }, connect = frames.first { $0.kind == .connect }
        XCTAssertEqual(auth?.device, "desk-1")
        XCTAssertEqual(connect?.device, "desk-1")
        XCTAssertEqual(connect?.sendOnly, true)
        await client.close()
        await tap.stop()
    }

    func testAClientWhoseDeviceWasTakenOverSaysSoAndDoesNotReconnect() async throws {
        let dave = TestRelay.uniqueUser("dave")
        let older = try await relay.connectClient(user: dave) { $0.device = "laptop" }
        let states = ConnectionStateLog(older)
        let newer = try await relay.connectClient(user: dave) { $0.device = "laptop" }
        let reason = SIMPClientError.takenOver(device: "laptop").description
        XCTAssertEqual(reason, "another session of device laptop took over; not reconnecting")
        let offline = await states.waitFor { $0 == .offline(reason: reason) }
        let soFar = await states.states
        XCTAssertTrue(offline, "\(soFar)")
        let takenOver = await older.wasTakenOver
        XCTAssertTrue(takenOver)
        // Quiet period: the test relay's clients reconnect after 0.1-0.5 s, so one that tried would show.
        _ = await Eventually.stays(for: .seconds(2)) {
            await !states.states.contains { if case .reconnecting = $0 { true } else { false } }
        }
        let seen = await states.states
        XCTAssertFalse(seen.contains { if case .reconnecting = $0 { return true } else { return false } }, "\(seen)")
        XCTAssertEqual(seen.filter { if case .connected = $0 { return true } else { return false } }.count, 1, "\(seen)")

        // The newer session keeps the device: it receives.
        let inbox = MessageInbox(newer)
        let carol = try await relay.connectClient(user: TestRelay.uniqueUser("carol"))
        let result = try await carol.send(text: "still yours", to: dave)
        guard case .delivered = result else { return XCTFail("\(result)") }
        let received = await inbox.waitFor(1)
        XCTAssertTrue(received)
    }

    /// Another device's `simp send` to a user that does not exist fails
    /// there; the relay tells every session of the user, and this one must not report it as
    /// its own (a chat showed "relay reported an error (unknownRecipient …)").
    func testAnErrorAboutAnotherDevicesMessageIsNotReportedAsThisSessionsOwn() async throws {
        let erin = TestRelay.uniqueUser("erin")
        let log = CapturedLog()
        _ = try await relay.connectClient(user: erin) {
            $0.device = "laptop"
            $0.logger = log.logger()
        }
        let phone = try await relay.connectClient(user: erin) { $0.device = "phone" }
        // A post to a room erin is not in: the relay tells every session of erin (an error the
        // store decides, PROTOCOL §4.3; UNKNOWN_RECIPIENT now goes to the sending session only).
        let result = try await phone.send(text: "let me in", toRoom: TestRelay.uniqueUser("closed"))
        guard case .failed(_, .rejected(.notAMember, _)) = result else { return XCTFail("\(result)") }
        let heard = await Eventually.holds {
            log.texts().contains { $0.hasPrefix("an error about a message this session is not sending") }
        }
        XCTAssertTrue(heard, "the laptop got the relay's error too: \(log.texts())")
        XCTAssertEqual(log.texts(atLeast: .notice).filter { $0.contains("notAMember") }, [], "not shown as the laptop's own")
    }

    func testTheOutboxResendsWhatAnEarlierProcessLeftWithItsIdAndForgetsSettledMessages() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob"), carol = TestRelay.uniqueUser("carol")
        let outbox = try Outbox(home: home, user: alice, device: "laptop")
        let bobInbox = MessageInbox(try await relay.connectClient(user: bob))
        await (try await relay.connectClient(user: carol)).close() // known to the relay, now offline: stored

        // What an earlier process left: saved before its first transmission, never receipted.
        let left = SIMPMessage(
            kind: .text, messageId: WallClock.microsecondsSinceEpoch(), fromUser: alice, toUser: bob,
            content: "from before", time: WallClock.millisecondsSinceEpoch())
        try outbox.save(left)
        let sender = try await relay.connectClient(user: alice) { $0.outbox = outbox }
        let (resent, unreadable) = try await sender.resendOutbox()
        XCTAssertEqual(unreadable, [])
        XCTAssertEqual(resent.map(\.message), [left])
        let delivered = try await sender.send(text: "to bob", to: bob)
        let stored = try await sender.send(text: "to carol", to: carol)
        let outcome = try await resent[0].result.get()
        guard case .delivered(let id, _, _) = outcome, case .delivered = delivered, case .stored = stored else {
            return XCTFail("\(outcome) \(delivered) \(stored)")
        }
        XCTAssertEqual(id, left.messageId, "resent with its original id")
        XCTAssertEqual(outbox.count, 0, "receipted and stored messages leave the outbox")
        let both = await bobInbox.waitFor(2)
        XCTAssertTrue(both)
        let texts = await bobInbox.messages.map { "\($0.messageId) \($0.content)" }
        XCTAssertEqual(texts.first, "\(left.messageId) from before", "\(texts)")
        XCTAssertEqual(texts.count, 2, "\(texts)")
    }

    func testSimpSendResendsWhatTheOutboxKeptOnItsDevice() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobInbox = MessageInbox(try await relay.connectClient(user: bob))
        let left = SIMPMessage(kind: .text, messageId: WallClock.microsecondsSinceEpoch(), fromUser: alice, toUser: bob, content: "left behind")
        try Outbox(home: home, user: alice, device: "desk").save(left)
        let environment = try await environment(alice)

        let send = try ChildProcess(
            "simp", ["send", "--no-e2e", "--server", server, "--user", alice, "--device", "desk", "--to", bob, "now"],
            environment: environment)
        let status = await send.exitStatus()
        XCTAssertEqual(status, 0, send.standardError)
        XCTAssertTrue(send.standardError.contains("resending 1 message left in the outbox by an earlier simp"), send.standardError)
        XCTAssertTrue(send.standardError.contains("earlier message \(left.messageId) to \(bob): delivered in"), send.standardError)
        XCTAssertEqual(try Outbox(home: home, user: alice, device: "desk").count, 0)
        let two = await bobInbox.waitFor(2)
        XCTAssertTrue(two)
        let received = await bobInbox.messages.map(\.content)
        XCTAssertEqual(received.filter { $0 == "left behind" }.count, 1, "\(received)")

        let again = try ChildProcess(
            "simp", ["send", "--no-e2e", "--server", server, "--user", alice, "--device", "desk", "--to", bob, "once more"],
            environment: environment)
        let againStatus = await again.exitStatus()
        XCTAssertEqual(againStatus, 0, again.standardError)
        XCTAssertFalse(again.standardError.contains("resending"), again.standardError)
        try Outbox(home: home, user: alice, device: "desk").save(left)
        let elsewhere = try ChildProcess(
            "simp", ["send", "--no-e2e", "--server", server, "--user", alice, "--device", "phone", "--to", bob, "from the phone"],
            environment: environment)
        let elsewhereStatus = await elsewhere.exitStatus()
        XCTAssertEqual(elsewhereStatus, 0, elsewhere.standardError)
        XCTAssertFalse(elsewhere.standardError.contains("resending"), "another device's outbox is not this one's: \(elsewhere.standardError)")
    }

    func testSimpSendKilledBeforeTheReceiptLeavesTheMessageForTheNextOne() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        try await relay.addUser(bob)
        // bob's session is on a UDP port where nobody listens: nothing is ever receipted.
        let silentBob = RawControlConnection()
        try await silentBob.connect(port: relay.port)
        try await silentBob.login(user: bob, password: TestRelay.password(for: bob), udpPort: 9)
        let environment = try await environment(alice)
        let forwardedBefore = try await relay.server.statistics().datagramsForwarded
        let send = try ChildProcess(
            "simp", ["send", "--no-e2e", "--server", server, "--user", alice, "--device", "desk", "--to", bob, "survives kill -9"],
            environment: environment)
        let outbox = try Outbox(home: home, user: alice, device: "desk")
        let saved = await Eventually.holds { outbox.count == 1 }
        XCTAssertTrue(saved, send.standardError)
        let retransmitting = try await Eventually.holds { // sent, and sent again: no receipt comes
            try await self.relay.server.statistics().datagramsForwarded >= forwardedBefore + 2
        }
        XCTAssertTrue(retransmitting, send.standardError)
        send.signal(SIGKILL)
        _ = await send.exitStatus()
        XCTAssertEqual(outbox.load().messages.map(\.content), ["survives kill -9"])
        let id = outbox.load().messages.first?.messageId ?? 0
        await silentBob.close()

        let bobInbox = MessageInbox(try await relay.connectClient(user: bob))
        let next = try ChildProcess(
            "simp", ["send", "--no-e2e", "--server", server, "--user", alice, "--device", "desk", "--to", bob, "and this"],
            environment: environment)
        let status = await next.exitStatus()
        XCTAssertEqual(status, 0, next.standardError)
        XCTAssertTrue(next.standardError.contains("earlier message \(id) to \(bob): delivered in"), next.standardError)
        let two = await bobInbox.waitFor(2)
        XCTAssertTrue(two)
        let onlyTwo = await Eventually.stays { await bobInbox.messages.count == 2 } // quiet period: no third copy
        XCTAssertTrue(onlyTwo)
        let received = await bobInbox.messages.map { "\($0.messageId) \($0.content)" }
        XCTAssertEqual(received.first, "\(id) survives kill -9")
        XCTAssertEqual(received.count, 2, "\(received)")
        XCTAssertEqual(outbox.count, 0)
    }

    func testSimpListenResendsTheOutboxOfItsDeviceToo() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobInbox = MessageInbox(try await relay.connectClient(user: bob))
        let left = SIMPMessage(kind: .text, messageId: WallClock.microsecondsSinceEpoch(), fromUser: alice, toUser: bob, content: "via listen")
        try Outbox(home: home, user: alice, device: "box").save(left)
        let listen = try ChildProcess(
            "simp", ["listen", "--no-e2e", "--server", server, "--user", alice, "--device", "box"],
            environment: try await environment(alice))
        let told = await Eventually.holds {
            listen.standardError.contains("earlier message \(left.messageId) to \(bob): delivered in")
        }
        XCTAssertTrue(told, listen.standardError)
        XCTAssertTrue(listen.standardError.contains("resending 1 message(s) left in the outbox by an earlier simp"), listen.standardError)
        let arrived = await bobInbox.waitFor(1)
        XCTAssertTrue(arrived)
        let texts = await bobInbox.messages.map(\.content)
        XCTAssertEqual(texts, ["via listen"])
        listen.signal(SIGTERM)
        _ = await listen.exitStatus()
    }

    func testAHomeThatCannotBeWrittenCostsTheOutboxNotTheMessage() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobInbox = MessageInbox(try await relay.connectClient(user: bob))
        var environment = try await environment(alice)
        try Data().write(to: home) // a file where the directory should be
        environment["SIMP_HOME"] = home.path
        let send = try ChildProcess(
            "simp", ["send", "--no-e2e", "--server", server, "--user", alice, "--to", bob, "anyway"], environment: environment)
        let status = await send.exitStatus()
        XCTAssertEqual(status, 0, send.standardError)
        XCTAssertTrue(send.standardError.contains("going on without an outbox"), send.standardError)
        let arrived = await bobInbox.waitFor(1)
        XCTAssertTrue(arrived)
    }

    func testADeviceInUseByARunningClientIsRefusedAndTheConfigFileNamesTheDevice() async throws {
        let dave = TestRelay.uniqueUser("dave")
        let environment = try await environment(dave)
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        try "device = \"from-config\"\n".write(to: home.appendingPathComponent("config.toml"), atomically: true, encoding: .utf8)
        let listen = try ChildProcess("simp", ["listen", "--no-e2e", "--server", server, "--user", dave], environment: environment)
        let listening = await Eventually.holds { listen.standardError.contains("listening as") }
        XCTAssertTrue(listening, listen.standardError)
        XCTAssertTrue(listen.standardError.contains("listening as \(dave) (device from-config) on"), listen.standardError)

        let clash = try ChildProcess("simp", ["send", "--no-e2e", "--server", server, "--user", dave, "--to", dave, "x"], environment: environment)
        let clashStatus = await clash.exitStatus()
        XCTAssertEqual(clashStatus, 1)
        XCTAssertTrue(
            clash.standardError.hasPrefix("simp: device \"from-config\" of \(dave) is in use by another running simp (process "), clash.standardError)
        XCTAssertTrue(clash.standardError.hasSuffix("); give another --device NAME\n"), clash.standardError)

        let typed = try ChildProcess(
            "simp", ["listen", "--no-e2e", "--server", server, "--user", dave, "--device", "bad/name"], environment: environment)
        let typedStatus = await typed.exitStatus()
        XCTAssertNotEqual(typedStatus, 0)
        XCTAssertTrue(typed.standardError.contains("--device: device name \"bad/name\" may only contain"), typed.standardError)
        listen.signal(SIGTERM)
        _ = await listen.exitStatus()
    }
}

/// Records a client's connection states.
actor ConnectionStateLog {
    private(set) var states: [ConnectionState] = []

    init(_ client: SIMPClient) {
        Task { [weak self] in
            for await state in client.connectionStates { await self?.append(state) }
        }
    }

    private func append(_ state: ConnectionState) { states.append(state) }

    /// Waits until a state matching `predicate` was seen.
    func waitFor(within timeout: TimeAmount = Eventually.generousBound, _ predicate: @Sendable @escaping (ConnectionState) -> Bool) async -> Bool {
        await Eventually.holds(within: timeout) { self.states.contains(where: predicate) }
    }
}
