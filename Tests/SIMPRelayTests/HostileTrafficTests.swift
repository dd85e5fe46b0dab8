import NIOCore
import SIMPClient
import SIMPCore
import SIMPFuzz
import SIMPLab
import SIMPRelay
import SIMPTestSupport
import XCTest

/// A live relay under a barrage of random and mutated datagrams and control frames (fixed
/// seed) keeps serving two real users chatting through it.
final class HostileTrafficTests: RelayTestCase {
    struct Barrage {
        var datagrams = 0
        var controlWrites = 0
        var connections = 0
    }

    func testChatSurvivesRandomAndMutatedTraffic() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let aliceClient = try await relay.connectClient(user: alice)
        let bobClient = try await relay.connectClient(user: bob)
        let aliceInbox = MessageInbox(aliceClient), bobInbox = MessageInbox(bobClient)
        let nonce = UInt32.random(in: .min ... .max)

        let relay = self.relay!
        async let barrage = Self.hostileTraffic(on: relay, aimedAt: bob, posingAs: alice, seed: 5)
        async let fromAlice = Self.chat(aliceClient, to: bob, texts: (1...20).map { "a\(nonce)-\($0)" })
        async let fromBob = Self.chat(bobClient, to: alice, texts: (1...20).map { "b\(nonce)-\($0)" })
        let (sent, aliceSent, bobSent) = try await (barrage, fromAlice, fromBob)
        // And once the barrage is over.
        async let afterFromAlice = Self.chat(aliceClient, to: bob, texts: ["a\(nonce)-after"])
        async let afterFromBob = Self.chat(bobClient, to: alice, texts: ["b\(nonce)-after"])
        let (aliceAfter, bobAfter) = try await (afterFromAlice, afterFromBob)

        XCTAssertGreaterThanOrEqual(sent.datagrams, 4000)
        XCTAssertGreaterThanOrEqual(sent.connections, 4)
        XCTAssertEqual(aliceSent + aliceAfter, (1...20).map { "a\(nonce)-\($0)" } + ["a\(nonce)-after"], "some of alice's sends failed")
        XCTAssertEqual(bobSent + bobAfter, (1...20).map { "b\(nonce)-\($0)" } + ["b\(nonce)-after"], "some of bob's sends failed")
        // Each real message arrives exactly once and in order, and nothing forged in alice's
        // name reaches bob.
        let bobGot = await bobInbox.messages.filter { $0.fromUser == alice }.map(\.content)
        let aliceGot = await aliceInbox.messages.filter { $0.fromUser == bob }.map(\.content)
        XCTAssertEqual(bobGot, aliceSent + aliceAfter)
        XCTAssertEqual(aliceGot, bobSent + bobAfter)

        let expected: [RejectReason] = [
            .malformed, .frameTooLarge, .notConnected, .unexpectedKind,
            .unsealed, .badMAC, .senderMismatch,
        ]
        let counted = try await Eventually.holds {
            let rejected = try await relay.server.statistics().rejected
            return expected.allSatisfy { rejected[$0, default: 0] > 0 }
        }
        let rejected = try await relay.server.statistics().rejected
        XCTAssertTrue(counted, "reject counters that did not move: \(expected.filter { rejected[$0] == nil }) in \(rejected)")
        XCTAssertGreaterThan(rejected[.malformed, default: 0], 500, "\(rejected)")
    }

    /// Sends `texts` one by one (20 ms apart, so they interleave with the barrage); returns
    /// those that were delivered.
    private static func chat(_ client: SIMPClient, to peer: String, texts: [String]) async throws -> [String] {
        var delivered: [String] = []
        for text in texts {
            if case .delivered = try await client.send(text: text, to: peer) { delivered.append(text) }
            try await Task.sleep(nanoseconds: 20_000_000) // paced, to interleave with the barrage
        }
        return delivered
    }

    /// 40 rounds of 100 datagrams and a few control-stream pieces on each of 4 raw TCP
    /// connections, reopened when the relay closes them. The datagrams come from a logged-in
    /// user, mallory: half are random or mutated payloads sealed with mallory's session key (a
    /// hostile client: they reach the decoders), a quarter are the same bytes unsealed, and a
    /// quarter are well-formed messages to `target` claiming to be from `victim`, sealed by
    /// mallory, every other one with a byte flipped after sealing.
    private static func hostileTraffic(
        on relay: TestRelay, aimedAt target: String, posingAs victim: String, seed: UInt64
    ) async throws -> Barrage {
        var inputs = HostileInputs(random: SeededRandom(seed: seed))
        let udp = relay.server.datagramAddress!
        let mallory = TestRelay.uniqueUser("mallory")
        try await relay.addUser(mallory)
        let malloryControl = RawControlConnection()
        let socket = RawDatagramSocket()
        try await socket.bind()
        try await malloryControl.connect(port: relay.port)
        var sealer = DatagramSealer(
            keys: try await malloryControl.login(user: mallory, password: TestRelay.password(for: mallory), udpPort: socket.port),
            direction: .uplink)
        var peers: [RawControlConnection] = []
        var barrage = Barrage()
        defer {
            let open = peers + [malloryControl]
            Task {
                for peer in open { await peer.close() }; await socket.close()
            }
        }
        for round in 0..<40 {
            let datagrams = (0..<100).map { i -> ByteBuffer in
                switch i % 4 {
                case 0, 1: return sealer.seal(payload: ByteBuffer(bytes: inputs.datagram()))
                case 2: return ByteBuffer(bytes: inputs.datagram())
                default:
                    var forged = sealer.seal(
                        SIMPMessage(kind: .text, messageId: inputs.random.next() | 1, fromUser: victim, toUser: target, content: "forged"))
                    if i % 8 == 7 { forged.setInteger(forged.getInteger(at: 20, as: UInt8.self)! ^ 0x40, at: 20) }
                    return forged
                }
            }
            try await socket.send(datagrams, to: udp)
            barrage.datagrams += datagrams.count
            for index in 0..<4 {
                if index >= peers.count || peers[index].isClosed {
                    let peer = RawControlConnection()
                    try await peer.connect(port: relay.port)
                    if index < peers.count { await peers[index].close(); peers[index] = peer } else { peers.append(peer) }
                    barrage.connections += 1
                }
                for _ in 0..<(round % 3 + 1) {
                    try? await peers[index].send(bytes: inputs.controlBytes()) // fails once the relay closed it
                    barrage.controlWrites += 1
                }
            }
            try await Task.sleep(nanoseconds: 10_000_000) // paced: a barrage round every 10 ms
        }
        return barrage
    }
}
