import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPE2E
import SIMPTestSupport
import XCTest

/// End-to-end encryption with a real relay and Redis where devices come and go: a
/// first message typed while the relay is unreachable, a peer's device added after the sender
/// learned its devices, and a copy this device cannot decrypt.
final class EndToEndDevicesTests: EndToEndRelayTestCase {
    private func connect(_ user: String, device: String, outbox: Outbox? = nil) async throws -> SIMPClient {
        try await connectEndToEnd(user, device: device) { $0.outbox = outbox }
    }

    /// alice never wrote to bob, so she does not know his devices, and the relay is down when
    /// she writes: both messages wait in her outbox (as plaintext, on her own disk) instead of
    /// failing, and at reconnect they are sealed for bob's devices and sent, once, in order.
    func testAFirstMessageTypedWhileTheRelayIsDownIsSealedAtReconnectAndArrivesOnce() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobClient = try await connect(bob, device: "phone")
        let inbox = MessageInbox(bobClient)
        let outbox = try Outbox(home: home, user: alice, device: "desk")
        let aliceClient = try await connect(alice, device: "desk", outbox: outbox)
        let states = ConnectionStateLog(aliceClient)

        let restart = Task { [relay = relay!] in try await relay.restart(downtime: .seconds(3)) }
        let lost = await states.waitFor { if case .reconnecting = $0 { true } else { false } }
        XCTAssertTrue(lost, "alice noticed the relay is gone")
        let first = try await aliceClient.submit(SIMPMessage(kind: .text, toUser: bob, content: "first words"))
        let second = try await aliceClient.submit(SIMPMessage(kind: .text, toUser: bob, content: "and more"))
        let waiting = outbox.load().messages
        XCTAssertEqual(waiting.map(\.messageId), [first.messageId, second.messageId])
        XCTAssertEqual(waiting.map(\.content), ["first words", "and more"], "kept as typed until it can be sealed")

        try await restart.value
        for outcome in [try await first.result.get(), try await second.result.get()] {
            switch outcome {
            case .delivered, .stored: break
            default: XCTFail("\(outcome)")
            }
        }
        let arrived = await inbox.waitFor(2)
        XCTAssertTrue(arrived)
        _ = await Eventually.stays(for: .seconds(1)) { await inbox.messages.count == 2 } // quiet period: room for a duplicate
        let messages = await inbox.messages
        XCTAssertEqual(messages.map(\.content), ["first words", "and more"], "once each, in order")
        XCTAssertEqual(messages.map(\.isEndToEnd), [true, true])
        XCTAssertEqual(messages.map(\.messageId), [first.messageId, second.messageId], "with the ids they were typed with")
        XCTAssertEqual(outbox.count, 0)
    }

    /// bob's second device logs in after alice fetched bob's devices (her list is fresh for 5
    /// minutes): the relay tells her of its new bundle, so her next message is sealed for both
    /// of bob's devices, and both read it; she is told bob has a new device.
    func testAPeersNewDeviceReadsTheNextMessage() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let phone = MessageInbox(try await connect(bob, device: "phone"))
        let aliceClient = try await connect(alice, device: "desk")
        let aliceNotices = EndToEndNoticeLog(aliceClient)
        guard case .delivered = try await aliceClient.send(text: "one", to: bob) else { return XCTFail("not delivered") }
        let first = await phone.waitFor(1)
        XCTAssertTrue(first)

        let laptop = MessageInbox(try await connect(bob, device: "laptop"))
        // The relay sent alice its notice before it answered the laptop's publish: a round trip
        // of alice's after that comes back behind the notice.
        _ = try await aliceClient.who([bob])
        _ = try await aliceClient.send(text: "two", to: bob)
        let onPhone = await phone.waitFor(2), onLaptop = await laptop.waitFor(1)
        XCTAssertTrue(onPhone && onLaptop)
        let (phoneTexts, laptopTexts) = (await phone.messages.map(\.content), await laptop.messages.map(\.content))
        XCTAssertEqual(phoneTexts, ["one", "two"])
        XCTAssertEqual(laptopTexts.last, "two", "the new device reads the next message")
        XCTAssertFalse(laptopTexts.contains(""), "no empty message")
        let newDevice = await aliceNotices.waitFor { $0 == .peer(.newDevice(user: bob, device: "laptop")) }
        XCTAssertTrue(newDevice)
    }

    /// A new device of bob's account is told to his other devices: at once to a connected one,
    /// with the address it logged in from, and at its next login to one that was offline.
    func testTheUsersOtherDevicesAreToldOfANewDevice() async throws {
        let bob = TestRelay.uniqueUser("bob")
        var phone = try await connect(bob, device: "phone")
        let phoneNotices = EndToEndNoticeLog(phone)
        let laptop = try await connect(bob, device: "laptop")
        let toldAtOnce = await phoneNotices.waitFor { $0 == .ownNewDevice(device: "laptop", loginAddress: "127.0.0.1") }
        XCTAssertTrue(toldAtOnce)
        XCTAssertEqual(
            EndToEndNotice.ownNewDevice(device: "laptop", loginAddress: "127.0.0.1").description,
            "a new device \"laptop\" logged in as you from 127.0.0.1")
        let laptopNotices = EndToEndNoticeLog(laptop)

        await phone.close()
        await (try await connect(bob, device: "tablet")).close()
        phone = try await connect(bob, device: "phone")
        let toldLater = await EndToEndNoticeLog(phone).waitFor { $0 == .ownNewDevice(device: "tablet", loginAddress: "") }
        XCTAssertTrue(toldLater)
        let laptopTold = await laptopNotices.waitFor { $0 == .ownNewDevice(device: "tablet", loginAddress: "127.0.0.1") }
        XCTAssertTrue(laptopTold)
        let laptopSaid = await laptopNotices.notices
        XCTAssertFalse(laptopSaid.contains { if case .ownNewDevice("phone", _) = $0 { true } else { false } }, "a known device is not news")
    }

    /// alice marks bob verified; bob's device loses its state and comes back with a new key:
    /// alice is told bob is no longer verified, and so is her next process (it is kept in
    /// `$SIMP_HOME`), until she marks him verified again.
    func testAVerifiedPeerWhoseKeyChangesIsToldUntilVerifiedAgain() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        var bobClient = try await connect(bob, device: "phone")
        var aliceClient = try await connect(alice, device: "desk")
        guard case .delivered = try await aliceClient.send(text: "one", to: bob) else { return XCTFail("not delivered") }
        let marked = try await aliceClient.markVerified(bob)
        XCTAssertEqual(marked, 1)

        await bobClient.close()
        try FileManager.default.removeItem(at: EndToEndFileStore(home: home, user: bob, device: "phone").directory)
        bobClient = try await connect(bob, device: "phone") // a new identity: the relay tells alice
        _ = try await aliceClient.who([bob]) // behind the relay's notice
        let notices = EndToEndNoticeLog(aliceClient)
        await assertRefused("two", from: aliceClient, to: bob)
        let told = await notices.waitFor { $0 == .verifiedKeyChanged(user: bob) }
        XCTAssertTrue(told)
        let numberTold = await notices.waitFor { if case .safetyNumberChanged(bob, "phone", _) = $0 { true } else { false } }
        XCTAssertTrue(numberTold, "the new safety number is said")

        await aliceClient.close()
        aliceClient = try await connect(alice, device: "desk")
        let again = EndToEndNoticeLog(aliceClient)
        await assertRefused("three", from: aliceClient, to: bob)
        let toldAgain = await again.waitFor { $0 == .verifiedKeyChanged(user: bob) }
        XCTAssertTrue(toldAgain, "kept across processes")
        let remarked = try await aliceClient.markVerified(bob)
        XCTAssertEqual(remarked, 1)
        guard case .delivered = try await aliceClient.send(text: "four", to: bob) else { return XCTFail("not delivered once verified again") }
        _ = bobClient
    }

    /// A room post is refused while a verified member's key changed since, and goes once the
    /// change is accepted (the member is then no longer verified).
    func testARoomPostWithAVerifiedMemberWhoseKeyChangedWaitsForTheChangeToBeAccepted() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob"), room = TestRelay.uniqueUser("ops")
        var bobClient = try await connect(bob, device: "phone")
        let aliceClient = try await connect(alice, device: "desk")
        _ = try await aliceClient.joinRoom(room)
        _ = try await bobClient.joinRoom(room)
        guard case .stored = try await aliceClient.send(text: "one", toRoom: room) else { return XCTFail("not posted") }
        let marked = try await aliceClient.markVerified(bob)
        XCTAssertEqual(marked, 1)

        await bobClient.close()
        try FileManager.default.removeItem(at: EndToEndFileStore(home: home, user: bob, device: "phone").directory)
        bobClient = try await connect(bob, device: "phone")
        _ = try await aliceClient.who([bob]) // behind the relay's notice
        do {
            _ = try await aliceClient.send(text: "for the old key", toRoom: room)
            XCTFail("posted to a room with a verified member whose key changed")
        } catch SIMPClientError.notEncryptable(let reason) {
            XCTAssertTrue(reason.contains("not posted to #\(room)") && reason.contains("--accept"), reason)
        }
        let wasVerified = try await aliceClient.acceptKeyChange(of: bob)
        XCTAssertTrue(wasVerified)
        guard case .stored = try await aliceClient.send(text: "after accepting", toRoom: room) else { return XCTFail("not posted") }
        await bobClient.close()
        await aliceClient.close()
    }

    /// Sending `text` to verified `peer` whose key changed is refused, naming how to accept it.
    private func assertRefused(_ text: String, from client: SIMPClient, to peer: String) async {
        do {
            _ = try await client.send(text: text, to: peer)
            XCTFail("\(text): sent to a verified user whose key changed")
        } catch SIMPClientError.notEncryptable(let reason) {
            XCTAssertTrue(reason.contains("simp keys --with \(peer) --accept"), reason)
        } catch {
            XCTFail("\(error)")
        }
    }

    /// A direct message whose envelope has no copy for this device (sealed before the sender
    /// knew it) is not handed over as an empty message: the user is told it could not be
    /// decrypted instead.
    func testAMessageWithoutACopyForThisDeviceIsANoticeNotAnEmptyMessage() async throws {
        let mallory = TestRelay.uniqueUser("mallory"), bob = TestRelay.uniqueUser("bob")
        let bobClient = try await connect(bob, device: "phone")
        let inbox = MessageInbox(bobClient)
        let notices = EndToEndNoticeLog(bobClient)
        let sender = try await relay.connectClient(user: mallory)
        var message = SIMPMessage(kind: .text, toUser: bob)
        message.e2ePayload = E2EEnvelope(senderDevice: "desk", copies: [("laptop", [1, 2, 3])]).encoded
        _ = try await sender.send(message)
        guard case .delivered = try await sender.send(text: "plain after", to: bob) else { return XCTFail("not delivered") }

        let arrived = await inbox.waitFor(1)
        XCTAssertTrue(arrived)
        let told = await notices.waitFor { if case .undecryptable(mallory, _, _) = $0 { true } else { false } }
        let (said, received) = (await notices.notices, await inbox.messages)
        XCTAssertTrue(told, "\(said)")
        XCTAssertEqual(received.map(\.content), ["plain after"], "no empty message")
    }
}

/// Records a client's end-to-end notices.
actor EndToEndNoticeLog {
    private(set) var notices: [EndToEndNotice] = []

    init(_ client: SIMPClient) {
        Task { [weak self] in
            for await notice in client.endToEndNotices { await self?.append(notice) }
        }
    }

    private func append(_ notice: EndToEndNotice) { notices.append(notice) }

    /// Waits until a notice matching `predicate` came.
    func waitFor(within timeout: TimeAmount = Eventually.generousBound, _ predicate: @Sendable @escaping (EndToEndNotice) -> Bool) async -> Bool {
        await Eventually.holds(within: timeout) { self.notices.contains(where: predicate) }
    }
}
