import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// A restarted receiver recognises copies of messages it already has: a message alice's
/// earlier process sent is resent from her outbox with its original id (her receipt never
/// came) after bob's receiver printed it and restarted. It is receipted (alice is told it was
/// delivered), not printed or stored again (docs/PROTOCOL.md §6.4).
final class ReceiverRestartTests: StoryProcessTestCase {

    func testACopyResentAfterTheListenerRestartedIsReceiptedNotPrinted() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let server = "127.0.0.1:\(relay.port)"
        let message = SIMPMessage(kind: .text, messageId: WallClock.microsecondsSinceEpoch(), fromUser: alice, toUser: bob, content: "only once")
        let first = try await startListening(bob, server: server)
        try await resendFromOutbox(message, as: alice)
        let once = await Eventually.holds { self.printed(by: [first]) == ["only once"] }
        XCTAssertTrue(once, first.standardOutput + first.standardError)
        first.signal(SIGTERM)
        _ = await first.exitStatus()

        let second = try await startListening(bob, server: server)
        let outcome = try await resendFromOutbox(message, as: alice)
        XCTAssertTrue(Self.arrived(outcome), "the copy is receipted: \(outcome)")
        let sender = try await relay.connectClient(user: alice)
        _ = try await sender.send(text: "after", to: bob)
        let after = await Eventually.holds { self.printed(by: [second]).contains("after") }
        XCTAssertTrue(after, second.standardOutput + second.standardError)
        XCTAssertEqual(printed(by: [first, second]), ["only once", "after"])
    }

    func testACopyResentAfterTheChatRestartedIsNeitherStoredNorShownAgain() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let message = SIMPMessage(kind: .text, messageId: WallClock.microsecondsSinceEpoch(), fromUser: alice, toUser: bob, content: "only once")
        let first = try await startChatting(bob, with: alice)
        try await resendFromOutbox(message, as: alice)
        // alice is a library client without end-to-end keys: chat marks her lines (not encrypted).
        let shown = await Eventually.holds { self.printed(by: [first.chat]).contains("only once (not encrypted)") }
        XCTAssertTrue(shown, first.chat.standardOutput + first.chat.standardError)
        try first.input.close() // end of input: the chat exits
        let status = await first.chat.exitStatus()
        XCTAssertEqual(status, 0, first.chat.standardOutput)

        let second = try await startChatting(bob, with: alice)
        let outcome = try await resendFromOutbox(message, as: alice)
        XCTAssertTrue(Self.arrived(outcome), "the copy is receipted: \(outcome)")
        let sender = try await relay.connectClient(user: alice)
        _ = try await sender.send(text: "after", to: bob)
        let after = await Eventually.holds { // stored first, then shown
            self.chatHistory(of: bob).contains("after") && self.printed(by: [second.chat]).contains("after (not encrypted)")
        }
        XCTAssertTrue(after, second.chat.standardOutput + second.chat.standardError)
        XCTAssertEqual(chatHistory(of: bob), ["only once", "after"], "stored once")
        let lines = ["only once (not encrypted)", "after (not encrypted)"]
        XCTAssertEqual(printed(by: [first.chat, second.chat]).filter { lines.contains($0) }, lines, "shown once")
        try second.input.close()
    }

    /// Delivered, or stored by the relay for bob's devices (then delivered): not failed.
    static func arrived(_ outcome: SendResult) -> Bool {
        switch outcome {
        case .delivered, .stored: true
        case .failed, .connectionLost: false
        }
    }

    /// Puts `message` in `user`'s outbox on device "desk" (as a process that sent it and died
    /// before the receipt leaves it) and resends it as the next client of that device does;
    /// returns its outcome.
    @discardableResult
    private func resendFromOutbox(_ message: SIMPMessage, as user: String) async throws -> SendResult {
        let outbox = try Outbox(home: home, user: user, device: "desk")
        try outbox.save(message)
        let client = try await relay.connectClient(user: user) {
            $0.device = "desk"
            $0.outbox = outbox
        }
        let (resent, _) = try await client.resendOutbox()
        XCTAssertEqual(resent.map(\.message.messageId), [message.messageId])
        let outcome = try await resent[0].result.get()
        await client.close()
        return outcome
    }
}
