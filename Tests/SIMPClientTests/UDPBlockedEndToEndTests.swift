import Foundation
import NIOCore
import SIMPTestSupport
import XCTest

/// Issue 29's bars with the real `simp` on a network that blocks UDP (the LD_PRELOAD shim,
/// `UDPBlockShim`), against a real relay and Redis: `simp send` exits 0 with the message
/// delivered, and `simp listen` prints it once, whether the sender's UDP is blocked from the
/// start, the receiver's, or both's.
///
/// EXPECTED TO FAIL until the fallback (datagrams carried over the control connection) has
/// landed: before it, the blocked sender prints "no receipt after 5 s ... still trying" and
/// never exits (killed after 30 s), and a blocked receiver never prints the message.
final class UDPBlockedEndToEndTests: StoryProcessTestCase {
    private func sendOnce(senderBlocked: Bool, receiverBlocked: Bool, file: StaticString = #filePath, line: UInt = #line) async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let server = "127.0.0.1:\(relay.port)"
        let blocked = try await UDPBlockShim.environment()
        let listen = try ChildProcess(
            "simp", ["listen", "--server", server, "--user", bob, "--device", "phone"],
            environment: try await environment(bob).merging(receiverBlocked ? blocked : [:]) { $1 })
        children.append(listen)
        let listening = await Eventually.holds(within: .seconds(15)) { listen.standardError.contains("listening as") }
        XCTAssertTrue(listening, listen.standardError, file: file, line: line)

        let text = "through a network without UDP"
        let started = NIODeadline.now()
        let send = try ChildProcess(
            "simp", ["send", "--server", server, "--user", alice, "--to", bob, text],
            environment: try await environment(alice).merging(senderBlocked ? blocked : [:]) { $1 })
        children.append(send)
        let status = await send.exitStatus(timeout: 30)
        print(
            "simp send (sender blocked \(senderBlocked), receiver blocked \(receiverBlocked)) ended after \((NIODeadline.now() - started).nanoseconds / 1_000_000) ms"
        )
        XCTAssertEqual(status, 0, send.standardOutput + send.standardError, file: file, line: line)
        XCTAssertTrue(send.standardOutput.contains("delivered"), send.standardOutput, file: file, line: line)
        XCTAssertFalse(
            send.standardError.contains("relay is slow or unreachable"), "it must not blame the relay: \(send.standardError)", file: file, line: line)
        try await assertEveryMessageOnce([text], printedBy: [listen], within: .seconds(15), file: file, line: line)
    }

    func testSimpSendWithTheSendersUDPBlockedIsDeliveredOnce() async throws {
        try await sendOnce(senderBlocked: true, receiverBlocked: false)
    }

    func testSimpSendWithTheReceiversUDPBlockedIsDeliveredOnce() async throws {
        try await sendOnce(senderBlocked: false, receiverBlocked: true)
    }

    func testSimpSendWithBothUDPBlockedIsDeliveredOnce() async throws {
        try await sendOnce(senderBlocked: true, receiverBlocked: true)
    }
}
