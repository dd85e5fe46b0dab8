import Foundation
import NIOCore
import SIMPCore
import SIMPTestSupport
import XCTest

@testable import SIMPClient

/// Cross-signing with a real relay and Redis (docs/E2E.md §3.4): bob's first device makes his
/// user key; a device of bob's that it did not approve, such as one the relay's operator adds
/// under bob's name, gets no plaintext of alice's messages, new or old, and alice is told; bob's
/// second device gets them once his first device approved it.
final class CrossSigningTests: EndToEndRelayTestCase {
    private func connect(_ user: String, device: String) async throws -> SIMPClient {
        try await connectEndToEnd(user, device: device) { $0.endToEnd?.makesUserKey = true }
    }

    func testADeviceTheOperatorAddsGetsNoPlaintextWhileAnApprovedOneDoes() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let phoneClient = try await connect(bob, device: "phone") // bob's first device: makes the user key
        let phone = MessageInbox(phoneClient)
        let laptopClient = try await connect(bob, device: "laptop")
        let laptop = MessageInbox(laptopClient)
        let laptopNotices = EndToEndNoticeLog(laptopClient)
        let aliceClient = try await connect(alice, device: "desk")
        let aliceNotices = EndToEndNoticeLog(aliceClient)

        // Not approved yet: the laptop gets nothing, and alice is told.
        let first = try await aliceClient.send(text: "before approval", to: bob)
        guard Self.messageId(of: first) != nil else { return XCTFail("not sent: \(first)") }
        let onPhone = await phone.waitFor(1)
        XCTAssertTrue(onPhone)
        let toldOfLaptop = await aliceNotices.waitFor { $0 == .unapprovedDevice(user: bob, device: "laptop") }
        XCTAssertTrue(toldOfLaptop)

        let laptopTold = await laptopNotices.waitFor {
            if case .undecryptable(alice, _, let reason) = $0 { reason.contains("not approved") } else { false }
        }
        XCTAssertTrue(laptopTold, "the laptop says why it cannot read the message")
        let approved = try await phoneClient.approveDevice("laptop")
        XCTAssertEqual(approved, ["laptop", "phone"])

        // The operator adds a device under bob's name (a login as bob, as through a relay of
        // their own on the same Redis): it publishes a bundle, which no device of bob signed.
        let ghostClient = try await connect(bob, device: "ghost")
        let ghost = MessageInbox(ghostClient)
        // The relay told alice of the new list and the ghost's bundle before it answered their
        // publishes: a round trip of alice's after that comes back behind the notices.
        _ = try await aliceClient.who([bob])
        let second = try await aliceClient.send(text: "after approval", to: bob)
        guard let id = Self.messageId(of: second) else { return XCTFail("not sent: \(second)") }
        let phoneGot = await phone.waitFor(2), laptopGot = await laptop.waitFor(1)
        XCTAssertTrue(phoneGot && laptopGot)
        let (phoneTexts, laptopTexts) = (await phone.messages.map(\.content), await laptop.messages.map(\.content))
        XCTAssertEqual(phoneTexts, ["before approval", "after approval"])
        XCTAssertEqual(laptopTexts, ["after approval"], "the approved device reads the next message, and only that")
        let toldOfGhost = await aliceNotices.waitFor { $0 == .unapprovedDevice(user: bob, device: "ghost") }
        XCTAssertTrue(toldOfGhost)

        // The ghost asks for the message again (a resend request): refused, it had no copy.
        let old = SIMPMessage(kind: .text, messageId: id, fromUser: alice, toUser: bob)
        try await ghostClient.onEngine(now: { engine in engine.endToEnd?.askAgain(for: old, device: "desk", via: engine) })
        let refused = await aliceNotices.waitFor { $0 == .resendRefused(user: bob, device: "ghost", messageId: id) }
        XCTAssertTrue(refused)
        try await Task.sleep(nanoseconds: 500_000_000) // room for a message sent to the ghost, if any
        let ghostTexts = await ghost.messages.map(\.content)
        XCTAssertFalse(ghostTexts.contains("after approval") || ghostTexts.contains("before approval"), "\(ghostTexts)")
        let said = await aliceNotices.notices
        XCTAssertEqual(said.filter { $0 == .unapprovedDevice(user: bob, device: "ghost") }.count, 1, "told once: \(said)")

        // bob removes the laptop (lost): alice's next message goes to the phone alone.
        let left = try await phoneClient.removeDevice("laptop")
        XCTAssertEqual(left, ["phone"])
        _ = try await aliceClient.who([bob])
        let third = try await aliceClient.send(text: "after removal", to: bob)
        XCTAssertNotNil(Self.messageId(of: third))
        let phoneGotThird = await phone.waitFor(3)
        XCTAssertTrue(phoneGotThird)
        try await Task.sleep(nanoseconds: 300_000_000) // room for a copy to the laptop, if any
        let laptopAfter = await laptop.messages.map(\.content)
        XCTAssertEqual(laptopAfter, ["after approval"], "a removed device gets nothing new")

        await ghostClient.close()
        await laptopClient.close()
        await phoneClient.close()
        await aliceClient.close()
    }

    /// A room's sender key goes only to approved devices: a device added under bob's name gets
    /// alice's new key with nothing it can open, so it cannot read her post; bob's phone does.
    func testARoomPostIsNotReadableByADeviceTheUsersKeyDidNotApprove() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob"), room = TestRelay.uniqueUser("ops")
        let phoneClient = try await connect(bob, device: "phone")
        let phone = MessageInbox(phoneClient)
        let ghostClient = try await connect(bob, device: "ghost")
        let ghost = MessageInbox(ghostClient)
        let aliceClient = try await connect(alice, device: "desk")
        let aliceNotices = EndToEndNoticeLog(aliceClient)
        _ = try await aliceClient.joinRoom(room)
        _ = try await phoneClient.joinRoom(room)
        _ = try await aliceClient.send(text: "for the room", toRoom: room)
        let read = await Eventually.holds { await phone.messages.contains { $0.content == "for the room" } }
        XCTAssertTrue(read)
        let told = await aliceNotices.waitFor { $0 == .unapprovedDevice(user: bob, device: "ghost") }
        XCTAssertTrue(told)
        try await Task.sleep(nanoseconds: 500_000_000) // room for the ghost to decrypt it, if it could
        let ghostTexts = await ghost.messages.map(\.content)
        XCTAssertFalse(ghostTexts.contains("for the room"), "\(ghostTexts)")
        await ghostClient.close()
        await phoneClient.close()
        await aliceClient.close()
    }

    /// bob makes a new user key (`simp devices reset`, as after losing the device that held the
    /// old one): alice, who pinned the old one, is told his safety number changed, and her next
    /// message still reaches the device the new key approves.
    func testANewUserKeyIsToldAsASafetyNumberChange() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let phoneClient = try await connect(bob, device: "phone")
        let phone = MessageInbox(phoneClient)
        let aliceClient = try await connect(alice, device: "desk")
        let aliceNotices = EndToEndNoticeLog(aliceClient)
        let one = try await aliceClient.send(text: "one", to: bob)
        XCTAssertNotNil(Self.messageId(of: one))
        try await phoneClient.resetUserKey()
        _ = try await aliceClient.who([bob]) // behind the relay's notice of the new list
        let two = try await aliceClient.send(text: "two", to: bob)
        XCTAssertNotNil(Self.messageId(of: two))
        let both = await phone.waitFor(2)
        XCTAssertTrue(both)
        let told = await aliceNotices.waitFor { $0 == .userKeyChanged(user: bob) }
        XCTAssertTrue(told)
        await phoneClient.close()
        await aliceClient.close()
    }

    /// The id of a message the relay delivered or took custody of (several devices receive it).
    private static func messageId(of result: SendResult) -> UInt64? {
        switch result {
        case .delivered(let id, _, _), .stored(let id, _): id
        default: nil
        }
    }

    /// A device that does not hold the user key cannot approve; the first device's list names it.
    func testOnlyTheDeviceHoldingTheUserKeyApproves() async throws {
        let bob = TestRelay.uniqueUser("bob")
        let phone = try await connect(bob, device: "phone")
        let laptop = try await connect(bob, device: "laptop")
        let listed = try await phone.approvedDevices()
        XCTAssertEqual(listed, ["phone"])
        do {
            _ = try await laptop.approveDevice("laptop")
            XCTFail("the laptop holds no user key")
        } catch SIMPClientError.notEncryptable(let text) {
            XCTAssertTrue(text.contains("does not hold"), text)
        }
        await laptop.close()
        await phone.close()
    }
}
