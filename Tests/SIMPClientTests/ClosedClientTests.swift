import Foundation
import NIOConcurrencyHelpers
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// A `SIMPClient` after `close()` (or while it closes), with a real relay and Redis: every call
/// answers, none waits on the stopped event loop (each used to wait forever). Work is refused
/// with `SIMPClientError.closed`; the reporting accessors answer with what the client knew
/// when it closed.
final class ClosedClientTests: RelayTestCase {
    private var home: URL!

    override func setUp() async throws {
        try await super.setUp()
        home = FileManager.default.temporaryDirectory.appendingPathComponent("simp-closed-\(UUID().uuidString)")
    }

    override func tearDown() async throws {
        try? FileManager.default.removeItem(at: home)
        try await super.tearDown()
    }

    func testEveryCallAfterCloseAnswers() async throws {
        let aliceName = TestRelay.uniqueUser("alice"), bobName = TestRelay.uniqueUser("bob")
        _ = try await relay.connectClient(user: bobName) { $0.endToEnd = EndToEndSettings(home: self.home) }
        let alice = try await relay.connectClient(user: aliceName) { $0.endToEnd = EndToEndSettings(home: self.home) }
        guard case .delivered = try await alice.send(text: "before", to: bobName) else { return XCTFail("not delivered") }
        _ = try await alice.safetyNumbers(with: bobName)
        let statisticsAtClose = try await alice.statistics()
        let relayIdAtClose = await alice.relayId, identityAtClose = await alice.identity
        XCTAssertNotNil(relayIdAtClose)
        XCTAssertNotNil(identityAtClose)
        XCTAssertNotNil(statisticsAtClose.smoothedRTT, "a delivered message gave an RTT sample")

        await alice.close()
        let answers = Answers(self)
        answers.expect("statistics") { try await alice.statistics() == statisticsAtClose }
        answers.expect("relayId") { await alice.relayId == relayIdAtClose }
        answers.expect("identity") { await alice.identity == identityAtClose }
        answers.expect("datagramPath") { await alice.datagramPath == .udp }
        answers.expect("stopped") { await alice.stopped == nil }
        answers.expect("wasTakenOver") { await !alice.wasTakenOver }
        answers.expect("messagesKeptInMemoryOnly") { await alice.messagesKeptInMemoryOnly.isEmpty }
        answers.expect("sendTyping") {
            await alice.sendTyping(to: bobName)
            return true
        }
        answers.expect("markRead") {
            await alice.markRead(from: bobName, upTo: 1)
            return true
        }
        answers.expectClosed("send") { _ = try await alice.send(text: "after", to: bobName) }
        answers.expectClosed("submit") { _ = try await alice.submit(SIMPMessage(kind: .text, toUser: bobName, content: "after")) }
        answers.expectClosed("connect") { try await alice.connect() }
        answers.expectClosed("joinRoom") { _ = try await alice.joinRoom("room") }
        answers.expectClosed("leaveRoom") { try await alice.leaveRoom("room") }
        answers.expectClosed("roomMembers") { _ = try await alice.roomMembers("room") }
        answers.expectClosed("send toRoom") { _ = try await alice.send(text: "after", toRoom: "room") }
        answers.expectClosed("who") { _ = try await alice.who([bobName]) }
        answers.expectClosed("who room") { _ = try await alice.who(room: "room") }
        answers.expectClosed("safetyNumbers") { _ = try await alice.safetyNumbers(with: bobName) }
        answers.expectClosed("markVerified") { _ = try await alice.markVerified(bobName) }
        await answers.check()
        XCTAssertTrue(SIMPClientError.closed.description.contains("close()"), SIMPClientError.closed.description)
    }

    /// Calls made while `close()` runs either run on the engine or are refused: none is left
    /// on a loop that stops, whichever side of the close it lands on.
    func testCallsRacingCloseAllAnswer() async throws {
        let bobName = TestRelay.uniqueUser("bob")
        _ = try await relay.connectClient(user: bobName)
        let alice = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))
        let answers = Answers(self)
        for index in 0..<40 {
            answers.expect("statistics \(index)") { try await alice.statistics().inFlight >= 0 }
            answers.expect("send \(index)") {
                do {
                    _ = try await alice.send(text: "racing \(index)", to: bobName)
                    return true
                } catch SIMPClientError.closed {
                    return true
                }
            }
            if index == 20 { await alice.close() }
        }
        await answers.check()
    }

    /// A message sent while the relay is away waits for it; closing the client gives its
    /// caller the outcome (`.connectionLost`: it would stay in the outbox) instead of leaving
    /// it waiting on the stopped loop.
    func testASendWaitingForTheRelayAnswersWhenTheClientCloses() async throws {
        let bobName = TestRelay.uniqueUser("bob")
        _ = try await relay.connectClient(user: bobName)
        let alice = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))
        let restart = Task { [relay = relay!] in try await relay.restart(downtime: .seconds(5)) }
        for await state in alice.connectionStates {
            if case .reconnecting = state { break }
        }
        let answers = Answers(self)
        answers.expect("the send's outcome") {
            guard case .connectionLost = try await alice.send(text: "while away", to: bobName) else { return false }
            return true
        }
        let sent = await Eventually.holds(within: .seconds(10)) { await alice.messagesKeptInMemoryOnly.count == 1 }
        XCTAssertTrue(sent)
        await alice.close()
        await answers.check()
        try await restart.value
    }
}

/// Calls started at once, each expected to answer: a call that does not within the (generous)
/// limit fails the test instead of hanging it.
private final class Answers: @unchecked Sendable { // `expectations` is touched by the test's own task only
    private let test: XCTestCase
    private var expectations: [XCTestExpectation] = []
    private let wrong = NIOLockedValueBox([String]())

    init(_ test: XCTestCase) { self.test = test }

    /// Starts `call`, which must answer true.
    func expect(_ name: String, _ call: @escaping @Sendable () async throws -> Bool) {
        let answered = test.expectation(description: "\(name) answers")
        expectations.append(answered)
        Task { [wrong] in
            do {
                if try await !call() { wrong.withLockedValue { $0.append("\(name): wrong answer") } }
            } catch {
                wrong.withLockedValue { $0.append("\(name): threw \(error)") }
            }
            answered.fulfill()
        }
    }

    /// Starts `call`, which must throw `SIMPClientError.closed`.
    func expectClosed(_ name: String, _ call: @escaping @Sendable () async throws -> Void) {
        expect(name) {
            do {
                try await call()
            } catch SIMPClientError.closed {
                return true
            }
            return false
        }
    }

    /// Waits for every call; a wrong answer or one that never came fails the test.
    func check() async {
        await test.fulfillment(of: expectations, timeout: 30)
        XCTAssertEqual(wrong.withLockedValue { $0 }, [])
    }
}
