import Foundation
import NIOCore
import SIMPCore
import SIMPTestSupport
import XCTest

@testable import SIMPClient

/// A resend request (docs/E2E.md §7.5) is honoured only for a device that had a copy of the
/// message when it was sent: a device added since (by its user, or made up by the relay's
/// operator) that asks for an old message gets nothing, and the sender's user is told.
final class ResendToNewDeviceTests: EndToEndRelayTestCase {
    func testANewDeviceAskingForAnOldMessageGetsNothingAndTheSenderIsTold() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let phone = try await connectEndToEnd(bob, device: "phone")
        let aliceClient = try await connectEndToEnd(alice, device: "desk")
        let aliceNotices = EndToEndNoticeLog(aliceClient)
        guard case .delivered(let id, _, _) = try await aliceClient.send(text: "before the ghost", to: bob) else { return XCTFail("not delivered") }

        let ghost = try await connectEndToEnd(bob, device: "ghost")
        let ghostInbox = MessageInbox(ghost)
        let old = SIMPMessage(kind: .text, messageId: id, fromUser: alice, toUser: bob)
        try await ghost.onEngine(now: { engine in engine.endToEnd?.askAgain(for: old, device: "desk", via: engine) })

        let told = await aliceNotices.waitFor { $0 == .resendRefused(user: bob, device: "ghost", messageId: id) }
        let said = await aliceNotices.notices
        XCTAssertTrue(told, "\(said)")
        try await Task.sleep(nanoseconds: 500_000_000) // room for a message sent again, if any
        let ghostGot = await ghostInbox.messages.map(\.content)
        XCTAssertFalse(ghostGot.contains("before the ghost"), "\(ghostGot)")
        XCTAssertFalse(said.contains { if case .resent(bob, "ghost", id, true) = $0 { true } else { false } })
        await ghost.close()
        await phone.close()
        await aliceClient.close()
    }
}
