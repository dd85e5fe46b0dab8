import NIOCore
import SIMPClient
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// Each attack on a live relay (real Redis, real sockets) fails, is counted, and leaves
/// everyone else served. Each test fails if its defence is removed.
final class SecurityTests: RelayTestCase {
    /// A user played by hand: a control connection, a UDP socket and the session's keys.
    final class RawUser {
        let name: String
        let control = RawControlConnection()
        let udp = RawDatagramSocket()
        var keys: SessionKeys!
        var sealer: DatagramSealer!
        var opener: DatagramOpener!

        init(_ name: String) { self.name = name }

        func login(to relay: TestRelay, password: String? = nil) async throws {
            try await control.connect(port: relay.port)
            try await udp.bind()
            keys = try await control.login(user: name, password: password ?? TestRelay.password(for: name), udpPort: udp.port)
            sealer = DatagramSealer(keys: keys, direction: .uplink)
            opener = DatagramOpener(keys: keys, direction: .downlink)
        }

        /// A sealed TEXT datagram from this user (or claiming to be from `from`).
        func datagram(_ id: UInt64, to: String, from: String? = nil) -> ByteBuffer {
            var message = SIMPMessage(kind: .text, messageId: id, fromUser: from ?? name, toUser: to, content: "m\(id)")
            message.attempt = 1
            return sealer.seal(message)
        }

        /// Closes both sockets; Sendable (the user is not), so a teardown block can hold it.
        var closer: @Sendable () async -> Void {
            { [control, udp] in
                await control.close()
                await udp.close()
            }
        }

        func close() async { await closer() }
    }

    private func rawUser(_ name: String, loggedIn: Bool = true) async throws -> RawUser {
        let user = RawUser(TestRelay.uniqueUser(name))
        try await relay.addUser(user.name)
        if loggedIn { try await user.login(to: relay) }
        addTeardownBlock(user.closer)
        return user
    }

    private func rejected(_ reason: RejectReason) async throws -> Int {
        try await relay.server.statistics().rejected[reason] ?? 0
    }

    /// Asserts that the relay counts `count` rejections for `reason` (waiting up to 3 s).
    private func assertRejected(_ reason: RejectReason, _ count: Int = 1, file: StaticString = #filePath, line: UInt = #line) async throws {
        _ = try await Eventually.holds { try await self.rejected(reason) >= count }
        let counted = try await rejected(reason)
        XCTAssertEqual(counted, count, "\(reason)", file: file, line: line)
    }

    // MARK: Login

    func testNobodyCanClaimAUserWithoutLoggingIn() async throws {
        let alice = TestRelay.uniqueUser("alice")
        try await relay.addUser(alice)
        let mallory = RawControlConnection()
        defer { Task { await mallory.close() } }
        try await mallory.connect(port: relay.port)
        var connect = SIMPMessage(kind: .connect, fromUser: alice)
        connect.udpPort = 9

        try await mallory.send(connect)

        let refusal = try await mallory.first(.error)
        XCTAssertEqual(refusal?.errorCode, .authRequired)
        let registered = try await relay.inspector.command(["EXISTS", "simp:user:{\(alice)}"]).integer
        XCTAssertEqual(registered, 0)
        try await assertRejected(.authRequired, 1)
    }

    func testAWrongPasswordAndAnUnknownUserAreRefusedAlikeAndClosed() async throws {
        let alice = try await rawUser("alice", loggedIn: false)
        let ghost = RawUser(TestRelay.uniqueUser("ghost"))
        addTeardownBlock(ghost.closer)

        await XCTAssertThrowsErrorAsync(try await alice.login(to: relay, password: "guess"))
        await XCTAssertThrowsErrorAsync(try await ghost.login(to: relay, password: "guess"))

        let answers = [try await alice.control.received().last, try await ghost.control.received().last]
        XCTAssertEqual(answers.map(\.?.errorCode), [.authFailed, .authFailed])
        XCTAssertEqual(answers[0]?.errorText, answers[1]?.errorText, "the answer does not tell who exists")
        let closed = await Eventually.holds { alice.control.isClosed && ghost.control.isClosed }
        XCTAssertTrue(closed)
        try await assertRejected(.authFailed, 2)
        let registered = try await relay.inspector.command(["EXISTS", "simp:user:{\(alice.name)}"]).integer
        XCTAssertEqual(registered, 0)
    }

    func testARecordedLoginReplayedOnAnotherConnectionFails() async throws {
        let alice = try await rawUser("alice")
        let recorded = try await alice.control.received() // the relay's frames; the client's are rebuilt below
        XCTAssertEqual(recorded.map(\.kind), [.challenge, .connected])
        // An eavesdropper saw AUTH and CONNECT (with alice's proof) on the wire and replays them.
        var client = LoginClient(user: alice.name, password: TestRelay.password(for: alice.name))
        var auth = SIMPMessage(kind: .auth, fromUser: alice.name)
        auth.nonce = Array(repeating: 1, count: 24)
        let proofFromTheWire = try client.answer(recorded[0], clientNonce: auth.nonce, udpPort: 9).frame
        let replayer = RawControlConnection()
        defer { Task { await replayer.close() } }
        try await replayer.connect(port: relay.port)

        try await replayer.send(auth)
        _ = try await replayer.first(.challenge) // a fresh relay nonce: the recorded proof no longer fits
        try await replayer.send(proofFromTheWire)

        let answer = try await replayer.first(.error)
        XCTAssertEqual(answer?.errorCode, .authFailed)
        try await assertRejected(.authFailed)
    }

    /// Wrong proofs for bob from 127.0.0.2 (six at once, then one after each
    /// of bob's logins) slow that address down, while bob, logging in with the real client from
    /// 127.0.0.1 meanwhile, gets in every time.
    func testAGuesserAtAnotherAddressDoesNotKeepTheOwnerOut() async throws {
        let bob = TestRelay.uniqueUser("bob")
        try await relay.addUser(bob)
        var answers: [SIMPMessage.ErrorCode?] = []
        /// AUTH, and a wrong proof if challenged; the relay's ERROR is kept.
        func guess() async throws {
            let guesser = RawControlConnection()
            defer { Task { await guesser.close() } }
            try await guesser.connect(port: relay.port, from: "127.0.0.2")
            var auth = SIMPMessage(kind: .auth, fromUser: bob)
            auth.nonce = Array(repeating: 7, count: 24)
            try await guesser.send(auth)
            _ = try await Eventually.holds { try await guesser.received().contains { [.challenge, .error].contains($0.kind) } }
            if try await guesser.received().contains(where: { $0.kind == .challenge }) {
                var connect = SIMPMessage(kind: .connect, fromUser: bob)
                connect.udpPort = 9
                connect.proof = Array(repeating: 0, count: 32)
                try await guesser.send(connect)
            }
            answers.append(try await guesser.first(.error)?.errorCode)
        }
        for _ in 0..<6 { try await guess() }
        for round in 1...12 {
            try await guess()
            do {
                var configuration = TestRelay.clientConfiguration(user: bob, port: relay.port)
                configuration.reconnect = nil // a refusal fails the connect instead of being retried
                let client = SIMPClient(configuration: configuration)
                try await client.connect()
                await client.close()
            } catch {
                return XCTFail("round \(round): bob was kept out: \(error)")
            }
        }
        XCTAssertEqual(answers.count, 18)
        XCTAssertEqual(Set(answers), [.authFailed, .rateLimited], "every guess is refused, and later ones are slowed down: \(answers)")
    }

    func testLoginAttemptsFromOneAddressAreThrottled() async throws {
        await relay.stop()
        relay = try await TestRelay.start { $0.loginLimit = RateLimit(perSecond: 0.01, burst: 2) }
        let alice = try await rawUser("alice", loggedIn: false)
        for _ in 0..<2 {
            let guess = RawUser(alice.name)
            await XCTAssertThrowsErrorAsync(try await guess.login(to: relay, password: "guess"))
            await guess.close()
        }

        let third = RawUser(alice.name)
        defer { Task { [close = third.closer] in await close() } }
        await XCTAssertThrowsErrorAsync(try await third.login(to: relay))

        let answer = try await third.control.received().last
        XCTAssertEqual(answer?.errorCode, .rateLimited, "even the right password waits")
        XCTAssertGreaterThan(answer?.retryAfterMillis ?? 0, 0)
        try await assertRejected(.loginRateLimited, 1)
    }

    // MARK: Datagrams

    func testForgedAndTamperedDatagramsNeverReachTheRecipient() async throws {
        let bob = try await relay.connectClient(user: TestRelay.uniqueUser("bob"))
        let inbox = MessageInbox(bob)
        let mallory = try await rawUser("mallory")
        let udp = relay.server.datagramAddress!
        // Unsealed, with bob's real sender's name.
        try await mallory.udp.send(
            MessageCodec.encode(SIMPMessage(kind: .text, messageId: 1, fromUser: "alice", toUser: bob.configuration.user)), to: udp)
        // Sealed under a key mallory made up, with mallory's real session id.
        var forger = DatagramSealer(keys: SessionKeys(sessionId: mallory.keys.sessionId, secret: Array(repeating: 0, count: 32)), direction: .uplink)
        try await mallory.udp.send(
            forger.seal(SIMPMessage(kind: .text, messageId: 2, fromUser: mallory.name, toUser: bob.configuration.user)), to: udp)
        // Mallory's own valid datagram with one payload byte flipped.
        var tampered = mallory.datagram(3, to: bob.configuration.user)
        tampered.setInteger(tampered.getInteger(at: 20, as: UInt8.self)! ^ 1, at: 20)
        try await mallory.udp.send(tampered, to: udp)
        // A session id nobody has.
        var stranger = DatagramSealer(keys: SessionKeys(sessionId: 12345, secret: Array(repeating: 0, count: 32)), direction: .uplink)
        try await mallory.udp.send(stranger.seal(SIMPMessage(kind: .text, messageId: 4, fromUser: "x", toUser: bob.configuration.user)), to: udp)

        try await assertRejected(.badMAC, 2)
        try await assertRejected(.unsealed, 1)
        try await assertRejected(.unknownSession, 1)
        _ = await Eventually.stays { await inbox.messages.isEmpty } // quiet period: a forged delivery would show
        let received = await inbox.messages
        XCTAssertEqual(received, [], "nothing forged was delivered")
    }

    func testAReplayedDatagramIsDroppedByTheRelay() async throws {
        let bobClient = try await relay.connectClient(user: TestRelay.uniqueUser("bob"))
        let inbox = MessageInbox(bobClient)
        let alice = try await rawUser("alice")
        let datagram = alice.datagram(1, to: bobClient.configuration.user)

        try await alice.udp.send(datagram, to: relay.server.datagramAddress!)
        try await alice.udp.send(datagram, to: relay.server.datagramAddress!)

        try await assertRejected(.replayed)
        let arrived = await inbox.waitFor(1)
        XCTAssertTrue(arrived)
        // bob's receipt datagram may still be on its way when his application has the message.
        _ = try await Eventually.holds { try await self.relay.server.statistics().datagramsForwarded >= 2 }
        _ = try await Eventually.stays { // quiet period: room for a forwarded copy to be counted
            try await self.relay.server.statistics().datagramsForwarded == 2
        }
        let forwarded = try await relay.server.statistics().datagramsForwarded
        XCTAssertEqual(forwarded, 2, "the message and bob's receipt datagram: the copy went no further than the relay")
    }

    func testASessionCannotSendAsAnotherUser() async throws {
        let bobClient = try await relay.connectClient(user: TestRelay.uniqueUser("bob"))
        let inbox = MessageInbox(bobClient)
        let mallory = try await rawUser("mallory")

        try await mallory.udp.send(mallory.datagram(7, to: bobClient.configuration.user, from: "alice"), to: relay.server.datagramAddress!)

        let error = try await mallory.control.first(.error)
        XCTAssertEqual(error?.errorCode, .senderMismatch)
        XCTAssertEqual(error?.messageId, 7)
        try await assertRejected(.senderMismatch, 1)
        _ = await Eventually.stays { await inbox.messages.isEmpty } // quiet period: a forged delivery would show
        let received = await inbox.messages
        XCTAssertEqual(received, [])
    }

    func testTheRouteFollowsTheNewestAuthenticSourceOnly() async throws {
        // bob is played by hand and never receipts: alice must not retransmit within the test.
        let alice = try await relay.connectClient(user: TestRelay.uniqueUser("alice")) { $0.retransmit.initialRTO = .seconds(30) }
        let bob = try await rawUser("bob")
        let relayUDP = relay.server.datagramAddress!
        let oldKeepalive = bob.sealer.seal(SIMPMessage(kind: .ping, fromUser: bob.name))
        _ = try await alice.submit(SIMPMessage(kind: .text, toUser: bob.name, content: "to the first port"))
        _ = try await Eventually.holds { try await bob.udp.received().count == 1 }
        let atFirstPort = try await bob.udp.received().count
        XCTAssertEqual(atFirstPort, 1)

        // bob's NAT rebinds: his next datagram comes from another port.
        let rebound = RawDatagramSocket()
        try await rebound.bind()
        addTeardownBlock { await rebound.close() }
        let fresh = bob.sealer.seal(SIMPMessage(kind: .ping, fromUser: bob.name))
        try await rebound.send(fresh, to: relayUDP)
        let moved = try await Eventually.holds {
            try await self.relay.inspector.command(["HGET", "simp:user:{\(bob.name)}", "addr"]).string == "127.0.0.1:\(rebound.port)"
        }
        XCTAssertTrue(moved, "Redis follows the newest authentic source")
        // From the old port: an older authentic datagram (accepted, moves nothing) and a copy of
        // the newest one (a replay: dropped).
        try await bob.udp.send(oldKeepalive, to: relayUDP)
        try await bob.udp.send(fresh, to: relayUDP)
        try await assertRejected(.replayed)
        let address = try await relay.inspector.command(["HGET", "simp:user:{\(bob.name)}", "addr"]).string
        XCTAssertEqual(address, "127.0.0.1:\(rebound.port)", "older and replayed datagrams never move the route")

        _ = try await alice.submit(SIMPMessage(kind: .text, toUser: bob.name, content: "to the new port"))

        let arrivedAtNewPort = try await Eventually.holds { try await rebound.received().count == 1 }
        XCTAssertTrue(arrivedAtNewPort)
        let stillAtFirstPort = try await bob.udp.received().count
        XCTAssertEqual(stillAtFirstPort, 1, "nothing more at the old port")
        let opened = try MessageCodec.decode(try bob.opener.open(try await rebound.received()[0]).payload)
        XCTAssertEqual(opened.content, "to the new port", "sealed with bob's key")
    }

    func testAClientWhoseClaimedPortIsWrongIsReachedThroughItsHello() async throws {
        // Behind a NAT the port a client binds is not the one the relay sees; the HELLO tells it.
        let bob = try await relay.connectClient(user: TestRelay.uniqueUser("bob")) { $0.advertisedUDPPort = 9 }
        let inbox = MessageInbox(bob)
        let alice = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))

        let result = try await alice.send(text: "found you", to: bob.configuration.user)

        guard case .delivered = result else { return XCTFail("\(result)") }
        let arrived = await inbox.waitFor(1)
        XCTAssertTrue(arrived)
    }

    func testAFloodingUserIsThrottledAndTold() async throws {
        await relay.stop()
        relay = try await TestRelay.start { $0.messageLimit = RateLimit(perSecond: 1, burst: 5) }
        let bobClient = try await relay.connectClient(user: TestRelay.uniqueUser("bob"))
        let inbox = MessageInbox(bobClient)
        let mallory = try await rawUser("mallory")

        for id in 1...20 {
            try await mallory.udp.send(mallory.datagram(UInt64(id), to: bobClient.configuration.user), to: relay.server.datagramAddress!)
        }

        try await assertRejected(.messageRateLimited, 15)
        let notice = try await mallory.control.first(.error)
        XCTAssertEqual(notice?.errorCode, .rateLimited)
        let arrived = await inbox.waitFor(5)
        XCTAssertTrue(arrived)
        _ = await Eventually.stays { await inbox.messages.count == 5 } // quiet period: one more would show
        let count = await inbox.messages.count
        XCTAssertEqual(count, 5, "the burst, no more")
        // Everyone else is still served.
        let carol = try await relay.connectClient(user: TestRelay.uniqueUser("carol"))
        guard case .delivered = try await carol.send(text: "hi", to: bobClient.configuration.user) else { return XCTFail() }
    }
}
