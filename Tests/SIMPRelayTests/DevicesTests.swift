import NIOCore
import SIMPClient
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// Several devices per user, send-only sessions and users known from their creation, against
/// a real Redis and a real relay (docs/PROTOCOL.md §4.3, §4.7, §6.6).
final class DevicesTests: XCTestCase {
    private var relay: TestRelay!
    private var cluster: TestRelayCluster?
    private var devices: [RawDevice] = []

    override func tearDown() async throws {
        for device in devices { await device.close() }
        await relay?.stop()
        await cluster?.stop()
    }

    /// A device of `user` (created in the credential store first) logged in on `on` (default:
    /// the test's relay).
    private func device(_ user: String, _ name: String, sendOnly: Bool = false, on: TestRelay? = nil) async throws -> RawDevice {
        let target: TestRelay = on ?? relay
        try await target.addUser(user)
        let device = try await RawDevice(
            user: user, password: TestRelay.password(for: user), device: name, sendOnly: sendOnly,
            controlPort: target.port)
        devices.append(device)
        return device
    }

    /// Waits until `device` has received `count` messages; returns them.
    private func messages(_ count: Int, at device: RawDevice, receipting: Bool = true) async throws -> [SIMPMessage] {
        _ = try await Eventually.holds {
            if receipting { try await device.receiptNew() }
            return try await device.messages().count >= count
        }
        if receipting { try await device.receiptNew() }
        return try await device.messages()
    }

    /// A newcomer: bob's earlier one-shot session made the default device known, then `simp
    /// chat` connected as "laptop". Two known devices, one online: alice's TYPING reaches it
    /// (docs/PROTOCOL.md §6.8).
    func testTypingReachesTheOnlineDeviceOfAUserWithTwoKnownDevices() async throws {
        relay = try await TestRelay.start()
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let earlier = try await device(bob, "")
        await earlier.close()
        let laptop = try await device(bob, "laptop")
        let sender = try await device(alice, "phone")
        try await sender.send(SIMPMessage(kind: .typing, messageId: 7, fromUser: alice, toUser: bob))
        let shown = try await Eventually.holds { try await laptop.typing().map(\.messageId) == [7] }
        XCTAssertTrue(shown, "the laptop shows alice typing")
    }

    /// An ERROR about a datagram goes only to the session that sent it (docs/PROTOCOL.md §4.3):
    /// dave's one-shot session hears UNKNOWN_RECIPIENT, his chat session does not.
    func testUnknownRecipientIsToldOnlyToTheSendingSession() async throws {
        relay = try await TestRelay.start()
        let dave = TestRelay.uniqueUser("dave"), nobody = TestRelay.uniqueUser("nobody")
        let chat = try await device(dave, "laptop")
        let oneShot = try await device(dave, "laptop", sendOnly: true)
        try await oneShot.sendText(5, to: nobody)
        let told = try await Eventually.holds {
            try await oneShot.frames(.error).contains { $0.messageId == 5 && $0.errorCode == .unknownRecipient }
        }
        XCTAssertTrue(told, "the sending session hears UNKNOWN_RECIPIENT")
        // The relay writes the errors of one datagram at once: by a PONG after it, any would be here.
        try await chat.control.send([SIMPMessage(kind: .ping, messageId: 99)])
        let ponged = try await Eventually.holds { try await chat.frames(.pong).contains { $0.messageId == 99 } }
        XCTAssertTrue(ponged)
        let chatErrors = try await chat.frames(.error)
        XCTAssertEqual(chatErrors, [], "the chat session is not told about a message it did not send")
    }

    /// Story 1: a send-only session of dave (a one-shot `simp send`) in the middle of an
    /// offline period takes nothing away; dave's receiving session gets carol's message after.
    func testASendOnlySessionNeverTakesStoredMessages() async throws {
        relay = try await TestRelay.start()
        let carol = TestRelay.uniqueUser("carol"), dave = TestRelay.uniqueUser("dave")
        try await relay.addUser(dave)
        let carolClient = try await relay.connectClient(user: carol)
        let notices = NoticeLog(carolClient)
        guard case .stored(let id, _) = try await carolClient.send(text: "while you were out", to: dave) else { return XCTFail("not stored") }

        let oneShot = try await device(dave, "laptop", sendOnly: true)
        try await oneShot.sendText(5, to: carol)
        let receiptForOneShot = try await Eventually.holds { try await oneShot.frames(.receipt).contains { $0.messageId == 5 } }
        XCTAssertTrue(receiptForOneShot, "the send-only session hears carol's receipt for what it sent")
        // Quiet period, past the relay's 1 s inbox start delay: a stored message would show.
        _ = try await Eventually.stays(for: .milliseconds(1500)) { try await oneShot.messages().isEmpty }
        let takenByOneShot = try await oneShot.messages()
        XCTAssertEqual(takenByOneShot, [], "a send-only session gets no stored messages")
        let stillConnected = !oneShot.control.isClosed
        XCTAssertTrue(stillConnected, "a send-only session does not replace (nor is replaced by) a receiving one")

        let receiver = try await device(dave, "laptop")
        let got = try await messages(1, at: receiver)
        XCTAssertEqual(got.map(\.messageId), [id])
        XCTAssertEqual(got.first?.content, "while you were out")
        let delivered = await notices.waitFor { $0 == .delivered(messageId: id, to: dave) }
        XCTAssertTrue(delivered, "carol hears her stored message was delivered")
        let oneShotOpen = !oneShot.control.isClosed
        XCTAssertTrue(oneShotOpen, "the receiving session of the same device leaves the send-only one alone")
    }

    /// Erin's phone connects and leaves; alice's X (seq 4) is stored for it; a
    /// new device, the laptop, connects (it starts after X: X is not for it); alice's Y (seq 5,
    /// floor 4, since X is not delivered yet) is stored and sent to the laptop at once. Its floor
    /// must skip X, or the laptop's receiver holds Y for its whole 30 s hold limit.
    func testANewDeviceIsNotMadeToWaitForWhatWasStoredBeforeItBecameKnown() async throws {
        relay = try await TestRelay.start()
        let alice = TestRelay.uniqueUser("alice"), erin = TestRelay.uniqueUser("erin")
        let phone = try await device(erin, "phone")
        await phone.close()
        let sender = try await device(alice, "desk")
        try await sender.sendText(1, to: erin, stream: 7, seq: 4, floor: 4)
        let xStored = try await Eventually.holds { try await sender.frames(.receipt).contains { $0.messageId == 1 && $0.status == .stored } }
        XCTAssertTrue(xStored, "erin is offline: X is stored")

        let laptop = try await device(erin, "laptop")
        let backlogRead = try await Eventually.holds { try await laptop.helloAnswered() } // it started its backlog read (empty: X is not for it)
        XCTAssertTrue(backlogRead)
        try await sender.sendText(2, to: erin, stream: 7, seq: 5, floor: 4)
        let got = try await messages(1, at: laptop)
        XCTAssertEqual(got.map(\.messageId), [2], "Y, and not X")
        XCTAssertEqual(got.map(\.seq), [5])
        XCTAssertEqual(got.map(\.floor), [5], "the laptop will never get seq 4: it need not wait for it")

        let phoneAgain = try await device(erin, "phone")
        let phoneGot = try await messages(2, at: phoneAgain)
        XCTAssertEqual(phoneGot.map(\.messageId), [1, 2], "the phone still gets both, in order")
        XCTAssertEqual(phoneGot.map(\.floor), [4, 4])
    }

    /// Bob has two known devices (the laptop has been connected), so the relay
    /// takes custody of alice's message, but bob is online on his phone: alice's client hears
    /// "sent to his devices", not "stored (offline)". Once the phone is gone too, it is stored.
    func testCustodyWhileOneOfTwoDevicesIsOnlineIsNotCalledOffline() async throws {
        relay = try await TestRelay.start()
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let laptop = try await device(bob, "laptop")
        await laptop.close()
        let phone = try await device(bob, "phone")
        let aliceClient = try await relay.connectClient(user: alice)

        let whileOnline = try await aliceClient.send(text: "are you there", to: bob)
        guard case .stored(let id, let receiverOnline) = whileOnline else { return XCTFail("custody expected, got \(whileOnline)") }
        XCTAssertTrue(receiverOnline, "bob's phone is online")
        let said = MessageFormatting.outcomeText(whileOnline)
        XCTAssertTrue(said.hasPrefix("sent to the receiver's devices"), said)
        XCTAssertFalse(said.contains("offline"), said)
        let got = try await messages(1, at: phone)
        XCTAssertEqual(got.map(\.messageId), [id], "the phone gets it now")

        await phone.close()
        // (Read in Redis: bob never wrote to alice, so her WHO would show her nothing of him.)
        let bobGone = try await Eventually.holds {
            try await self.relay.inspector.command(["HGET", PresenceStore.presenceKey(bob), "state"]).string == "offline"
        }
        XCTAssertTrue(bobGone, "the relay saw the phone leave")
        let whileOffline = try await aliceClient.send(text: "later then", to: bob)
        guard case .stored(_, let nowOnline) = whileOffline else { return XCTFail("stored expected, got \(whileOffline)") }
        XCTAssertFalse(nowOnline, "no device of bob is online")
    }

    /// Story 3: a user that exists in the credential store is known before its first login;
    /// only names that do not exist are unknown.
    func testAUserIsKnownFromTheMomentItIsCreated() async throws {
        relay = try await TestRelay.start()
        let erin = TestRelay.uniqueUser("erin"), nobody = TestRelay.uniqueUser("nobody")
        try await relay.addUser(erin)
        let alice = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))

        let toErin = try await alice.send(text: "welcome", to: erin)
        guard case .stored = toErin else { return XCTFail("a created user's message is stored, got \(toErin)") }
        let toNobody = try await alice.send(text: "hello?", to: nobody)
        guard case .failed(_, let failure) = toNobody else { return XCTFail("a name that does not exist is unknown, got \(toNobody)") }
        XCTAssertTrue("\(failure)".contains("\(nobody)"), "\(failure)")

        let erinDevice = try await device(erin, "phone")
        let got = try await messages(1, at: erinDevice)
        XCTAssertEqual(got.map(\.content), ["welcome"], "erin's first login gets what waited for her")
    }

    /// Story 2: two receiving devices of one user both get every message once and in order;
    /// a newer session of device A replaces only A.
    func testEveryReceivingDeviceGetsEveryMessageOnceInOrder() async throws {
        relay = try await TestRelay.start()
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let phone = try await device(bob, "phone")
        let laptop = try await device(bob, "laptop")
        let sender = try await device(alice, "desk")
        let count = 20
        for id in 1...UInt64(count) { try await sender.sendText(id, to: bob, stream: 7, seq: id, floor: 1) }

        for bobDevice in [phone, laptop] {
            let got = try await messages(count, at: bobDevice)
            XCTAssertEqual(got.map(\.messageId), Array(1...UInt64(count)), "\(bobDevice.device): every message once, in order")
            XCTAssertEqual(got.map(\.seq), Array(1...UInt64(count)))
        }
        let settled = try await Eventually.holds {
            Set(try await sender.frames(.receipt).filter { $0.status == .deliveredFromInbox }.map(\.messageId)).count == count
        }
        XCTAssertTrue(settled, "alice hears every message was delivered")

        let phoneAgain = try await device(bob, "phone")
        let replaced = await Eventually.holds { phone.control.isClosed }
        XCTAssertTrue(replaced, "the newer session of the phone replaces the old one")
        let error = try await phone.frames(.error).first
        XCTAssertEqual(error?.errorCode, .alreadyConnected)
        XCTAssertEqual(error?.errorText, "a newer session of \(bob)'s device \"phone\" took over")
        XCTAssertFalse(laptop.control.isClosed, "the laptop's session is untouched")

        try await sender.sendText(UInt64(count + 1), to: bob, stream: 7, seq: UInt64(count + 1), floor: 1)
        let laptopGot = try await messages(count + 1, at: laptop)
        XCTAssertEqual(laptopGot.last?.messageId, UInt64(count + 1))
        let phoneGot = try await messages(1, at: phoneAgain)
        XCTAssertEqual(phoneGot.map(\.messageId), [UInt64(count + 1)], "the phone's new session gets what its old one had not")
    }

    /// A device that has not connected for the inbox TTL, and has no session, is forgotten
    /// (with its inbox) at the user's next login; a device with a live session never is.
    func testADeviceAbsentForTheInboxTTLIsForgotten() async throws {
        relay = try await TestRelay.start { $0.inboxTTLSeconds = 1 }
        let bob = TestRelay.uniqueUser("bob")
        let phone = try await device(bob, "phone")
        let tablet = try await device(bob, "tablet")
        await phone.close()
        try await Task.sleep(nanoseconds: 1_200_000_000) // past the 1 s TTL (a lower bound: load only lengthens it)
        _ = try await device(bob, "laptop")
        let known = try await relay.inspector.command(["HKEYS", Registry.devicesKey(bob)]).array?.compactMap(\.string) ?? []
        XCTAssertEqual(Set(known), ["tablet", "laptop"], "the phone is forgotten; the tablet, online, is not")
        XCTAssertFalse(tablet.control.isClosed)
    }

    /// Story 2 across relays: bob's devices on two relays both get every message once, in
    /// order, from a sender on one of them.
    func testDevicesOnDifferentRelaysEachGetEveryMessage() async throws {
        let cluster = try await TestRelayCluster.start(relays: 2)
        self.cluster = cluster
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let phone = try await device(bob, "phone", on: cluster.relays[0])
        let laptop = try await device(bob, "laptop", on: cluster.relays[1])
        let sender = try await device(alice, "desk", on: cluster.relays[0])
        // A new device counts from when the relays holding the user's other devices hear of it
        // (its move announcement, then a lookup): probes on a stream of their own, one every
        // 250 ms, until one reaches the laptop.
        var probes: UInt64 = 0, lastProbe = NIODeadline.uptimeNanoseconds(0)
        let heard = try await Eventually.holds {
            if NIODeadline.now() - lastProbe > .milliseconds(250) {
                (probes, lastProbe) = (probes + 1, .now())
                try await sender.sendText(1000 + probes, to: bob, stream: 9, seq: probes, floor: 1)
            }
            return try await laptop.messages().contains { $0.stream == 9 }
        }
        XCTAssertTrue(heard, "bob's laptop is known on the sender's relay")
        let count = 10
        for id in 1...UInt64(count) { try await sender.sendText(id, to: bob, stream: 2, seq: id, floor: 1) }
        for bobDevice in [phone, laptop] {
            _ = try await Eventually.holds {
                try await bobDevice.receiptNew()
                return try await bobDevice.messages().filter { $0.stream == 2 }.count >= count
            }
            try await bobDevice.receiptNew()
            let got = try await bobDevice.messages().filter { $0.stream == 2 }
            XCTAssertEqual(got.map(\.messageId), Array(1...UInt64(count)), "\(bobDevice.device): every message once, in order")
        }
        let settled = try await Eventually.holds {
            let receipts = try await sender.frames(.receipt).filter { $0.status == .deliveredFromInbox && $0.messageId <= UInt64(count) }
            return Set(receipts.map(\.messageId)).count == count
        }
        XCTAssertTrue(settled, "alice hears every message was delivered, whichever relay the receipt came through")
    }

    /// Story 5: bob offline, alice's 900 messages stored; bob's receiver takes ~50 and dies;
    /// started again it gets the rest: all 900 arrive, none twice, and the relay removed only
    /// what was receipted.
    func testABacklogSurvivesAReceiverThatDiesWhileTakingIt() async throws {
        relay = try await TestRelay.start()
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        try await relay.addUser(bob)
        let sender = try await device(alice, "desk")
        let total = 900
        for batch in stride(from: 1, through: total, by: 50) {
            for id in batch..<(batch + 50) { try await sender.sendText(UInt64(id), to: bob, stream: 3, seq: UInt64(id), floor: 1) }
            _ = try await Eventually.holds {
                try await sender.frames(.receipt).filter { $0.status == .stored }.count >= batch + 49
            }
        }
        let stored = Set(try await sender.frames(.receipt).filter { $0.status == .stored }.map(\.messageId))
        XCTAssertEqual(stored.count, total, "every message is stored")

        let first = try await device(bob, "listener")
        _ = try await Eventually.holds { try await first.messages().count >= 50 }
        let taken = try await first.receiptNew(limit: 50)
        XCTAssertEqual(taken, 50)
        let receipted = Set(try await first.messages().prefix(50).map(\.messageId))
        await first.close() // killed: everything it had not receipted must come again

        let second = try await device(bob, "listener")
        let rest = try await messages(total - 50, at: second)
        XCTAssertEqual(rest.count, total - 50, "the restarted receiver gets exactly what was not receipted")
        XCTAssertTrue(receipted.isDisjoint(with: rest.map(\.messageId)), "none twice")
        let missing = Set(1...UInt64(total)).subtracting(receipted.union(rest.map(\.messageId)))
        XCTAssertEqual(missing.sorted(), [], "all 900 arrive")
        XCTAssertTrue(
            rest.allSatisfy { $0.stream == 3 && $0.seq == $0.messageId }, "with their original stream and seq (the receiver orders by them)")
    }
}
