import Foundation
import NIOCore
import SIMPCore
import SIMPE2E
import SIMPTestSupport
import XCTest

@testable import SIMPClient

/// A room post held for its sender key (docs/E2E.md §14.3) outlives the process that received
/// it: it is kept in the device's store, and the next process of the same device and home hands
/// it over, once, when the key arrives, counted by `simp listen --count`. Real relay, real Redis.
final class HeldRoomPostRestartTests: StoryProcessTestCase {
    private let post = "vault code 4417"

    /// bob's first client gets alice's post before its key and is closed; a new client of the
    /// same device and home then gets the key: the post is handed over exactly once (a message
    /// sent after the key arrives after it), and the store no longer holds it.
    func testAPostHeldWhenTheClientClosedIsHandedOverOnceByTheNextClient() async throws {
        let (bob, sender) = try await holdAPost()
        let again = try await relay.connectClient(user: bob) { self.configureBob(&$0) }
        let inbox = MessageInbox(again)
        try await sender.sendHeldKey()
        try await sender.sendDirect("after the key")
        let arrived = await inbox.waitFor(2)
        XCTAssertTrue(arrived)
        let received = await inbox.messages
        XCTAssertEqual(received.map(\.content), [post, "after the key"], "the held post, once, then the next message")
        XCTAssertEqual(received.first?.author, sender.user)
        XCTAssertEqual(try heldPosts(of: bob).count, 0, "handed over: out of the store")
    }

    /// `simp listen --count 1` started after two posts were held takes the first, handed over
    /// when their key arrives, as its one message: the second post stays held (undecrypted, in
    /// the store) and the message behind the key in the same backlog is neither printed nor
    /// receipted; the next run prints both.
    func testAPostHandedOverLateCountsInListenCount() async throws {
        let (bob, sender) = try await holdAPost(also: "second post")
        try await sender.sendHeldKey()
        try await sender.sendDirect("behind the key")
        let server = "127.0.0.1:\(relay.port)"
        let counted = try ChildProcess(
            "simp", ["listen", "--server", server, "--user", bob, "--device", "phone", "--count", "1"],
            environment: try await environment(bob))
        children.append(counted)
        let status = await counted.exitStatus()
        XCTAssertEqual(status, 0, counted.standardError)
        XCTAssertEqual(printed(by: [counted]), [post], counted.standardError)

        let rest = try await startListening(bob, server: server)
        let printedRest = await Eventually.holds { !self.printed(by: [rest]).isEmpty }
        XCTAssertTrue(printedRest, rest.standardOutput + rest.standardError)
        let printedAll = await Eventually.holds { self.printed(by: [rest]).count >= 2 }
        XCTAssertTrue(printedAll, rest.standardOutput + rest.standardError)
        XCTAssertEqual(printed(by: [counted, rest]), [post, "second post", "behind the key"], "each once, in order")
    }

    /// bob (device "phone", end to end, in a room with alice) receives alice's post (and
    /// `others`) sealed with a sender key whose distribution is kept back, holds it, and
    /// closes. Returns bob's name and alice's sending side (which sends the key when asked).
    private func holdAPost(also others: String...) async throws -> (bob: String, sender: ScriptedSender) {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let room = TestRelay.uniqueUser("ops")
        _ = try await environment(bob) // the user, for the `simp listen` of the test
        let first = try await relay.connectClient(user: bob) { self.configureBob(&$0) }
        _ = try await first.joinRoom(room)
        let aliceClient = try await relay.connectClient(user: alice)
        _ = try await aliceClient.joinRoom(room)

        var random = SystemRandomNumberGenerator()
        let bobKeys = try E2EMessenger(device: "phone", store: EndToEndFileStore(home: home, user: bob, device: "phone"), using: &random)
        var aliceKeys = try E2EMessenger(device: "script", store: MemoryStateStore(), using: &random)
        let bundle = bobKeys.local.prekeys.bundle(identity: bobKeys.local.identity, oneTimePrekeys: [])
        _ = try aliceKeys.updateDevices(of: bob, bundles: [("phone", bundle)], using: &random)
        let sealed = try aliceKeys.sealRoomPost(SIMPMessage(content: post).endToEndPlaintext, room: room, members: [bob], using: &random)
        _ = try await aliceClient.send(SIMPMessage(kind: .text, toUser: "#" + room).sealedEndToEnd(sealed.post))
        for text in others {
            let next = try aliceKeys.sealRoomPost(SIMPMessage(content: text).endToEndPlaintext, room: room, members: [bob], using: &random)
            XCTAssertTrue(next.distributions.isEmpty, "the same sender key")
            _ = try await aliceClient.send(SIMPMessage(kind: .text, toUser: "#" + room).sealedEndToEnd(next.post))
        }

        let held = await Eventually.holds { ((try? self.heldPosts(of: bob)) ?? []).count == 1 + others.count }
        XCTAssertTrue(held, "bob's client did not hold the post")
        await first.close()
        let gone = await Eventually.holds { (try? await self.relay.inspector.command(["EXISTS", "simp:user:{\(bob)}"]).integer) == 0 }
        XCTAssertTrue(gone)
        let sender = ScriptedSender(user: alice, bob: bob, client: aliceClient, keys: aliceKeys, distribution: sealed.distributions[0].envelope)
        return (bob, sender)
    }

    private func configureBob(_ configuration: inout ClientConfiguration) {
        configuration.device = "phone"
        configuration.endToEnd = EndToEndSettings(home: home)
    }

    /// The posts bob's device keeps in its store waiting for their keys.
    private func heldPosts(of bob: String) throws -> [HeldRoomPosts.Post] {
        try EndToEndFileStore(home: home, user: bob, device: "phone").load(RoomPosts.storeName).map(RoomPosts.decoded) ?? []
    }
}

/// alice's side, sealed by the test: the distribution kept back, and direct messages on the
/// same pairwise session, sent through a client without end-to-end encryption of its own.
private final class ScriptedSender: @unchecked Sendable { // `keys` is used by the test's own task only
    let user: String
    let bob: String
    let client: SIMPClient
    var keys: E2EMessenger
    let distribution: [UInt8]

    init(user: String, bob: String, client: SIMPClient, keys: E2EMessenger, distribution: [UInt8]) {
        (self.user, self.bob, self.client, self.keys, self.distribution) = (user, bob, client, keys, distribution)
    }

    /// The kept-back sender key.
    func sendHeldKey() async throws {
        try await send(distribution, what: "the sender key")
    }

    func sendDirect(_ text: String) async throws {
        try await send(try keys.seal(SIMPMessage(content: text).endToEndPlaintext, to: bob), what: "\"\(text)\"")
    }

    /// Sends `envelope` to bob: delivered, or stored by the relay while bob is offline.
    private func send(_ envelope: [UInt8], what: String) async throws {
        switch try await client.send(SIMPMessage(kind: .text, toUser: bob).sealedEndToEnd(envelope)) {
        case .delivered, .stored: break
        case let other: XCTFail("\(what) did not reach bob: \(other)")
        }
    }
}
