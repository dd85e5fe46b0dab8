import NIOCore
import SIMPCore
import SIMPTestKit

/// The relay's work per message for `scripts/bench-guard`: the real engine and channel handlers
/// (`EmbeddedRelay`, with `simp-server`'s logs and metrics) on an `EmbeddedEventLoop` with the
/// in-memory store, users connected as clients do, and every message its own read burst (as at
/// 10,000 msg/s, where each datagram wakes the relay). Only the relay's handling of each input
/// is counted, from the channel read to the write of what it sends; sealing the clients'
/// datagrams, moving the virtual clock (100 µs per message) and checking what came out are not.
/// Seeds, addresses and time are fixed, so a run repeats exactly.
///
/// Phases (each `messages` counted after `warmup` uncounted):
/// - `relay.datagram`: a sealed 200-byte TEXT from alice to bob, online here: opened, routed,
///   sealed for bob and written;
/// - `relay.receipt-datagram`: bob's receipt's datagram copy, forwarded to alice the same way;
/// - `relay.receipt-frame`: bob's RECEIPT frame on his control connection, forwarded to alice's;
/// - `relay.store`: a TEXT from alice to carol, who is offline: stored in carol's inbox;
/// - `relay.file-chunk`: a FILE_CHUNK from alice to bob (a sealed 1,100-byte chunk, as `FileSend`
///   sends): opened, its routing header read, sealed for bob's receiving session and written.
public enum RelayInstructionWorkload {
    /// The size of each TEXT datagram on the wire, as `scripts/bench-compare` sends.
    public static let datagramSize = 200

    public static func run(messages: Int, warmup: Int = 20, marks: InstructionMarks) throws -> [InstructionPhase] {
        var run = try Run(marks: marks)
        marks.startInstrumentation()
        return [
            try run.phase("relay.datagram", messages: messages, warmup: warmup) { try $0.datagramToOnlineUser(counted: $1) },
            try run.phase("relay.receipt-datagram", messages: messages, warmup: warmup) { try $0.receiptDatagram(counted: $1) },
            try run.phase("relay.receipt-frame", messages: messages, warmup: warmup) { try $0.receiptFrame(counted: $1) },
            try run.phase("relay.store", messages: messages, warmup: warmup) { try $0.datagramToOfflineUser(counted: $1) },
            try run.phase("relay.file-chunk", messages: messages, warmup: warmup) { try $0.fileChunk(counted: $1) },
        ]
    }

    /// One relay with alice and bob online and carol offline, and the clients' sealers.
    struct Run {
        let relay: EmbeddedRelay
        let marks: InstructionMarks
        var alice: EmbeddedUser
        var bob: EmbeddedUser
        var nextId: UInt64 = 1
        let content: String

        init(marks: InstructionMarks) throws {
            var configuration = EmbeddedRelay.developmentConfiguration()
            // As simp-bench's relays: the senders' rate limit is not what is measured.
            configuration.messageLimit = RateLimit(perSecond: 10_000_000, burst: 10_000_000)
            relay = try EmbeddedRelay(configuration: configuration, seed: 40, instrumented: true)
            relay.listen()
            try relay.connect("carol", port: 50_020)
            relay.control(of: "carol").close(promise: nil) // carol goes offline: her messages are stored
            relay.loop.run()
            try relay.connect("alice", port: 50_000)
            try relay.connect("bob", port: 50_010)
            alice = relay.users["alice"]!
            bob = relay.users["bob"]!
            self.marks = marks
            var probe = alice.sealer
            let overhead = probe.seal(SIMPMessage(kind: .text, messageId: 1 << 40, fromUser: "alice", toUser: "bob", content: "")).readableBytes
            // A content length of 128 or more takes a second length byte.
            let length = RelayInstructionWorkload.datagramSize - overhead - (RelayInstructionWorkload.datagramSize - overhead > 128 ? 1 : 0)
            content = String(repeating: "x", count: max(0, length))
        }

        /// Runs `warmup` then `messages` inputs through `step`, counting only the latter's
        /// marked windows, and dumps them as `name`.
        mutating func phase(
            _ name: String, messages: Int, warmup: Int, _ step: (inout Run, _ counted: Bool) throws -> Void
        ) throws -> InstructionPhase {
            for index in 0..<(warmup + messages) {
                relay.advance(by: .microseconds(100))
                try step(&self, index >= warmup)
            }
            let phase = InstructionPhase(name: name, messages: messages)
            marks.finish(phase)
            return phase
        }

        /// Hands `sealed` from `user` to the relay's UDP socket, counted if `counted`.
        func receive(_ sealed: ByteBuffer, from user: EmbeddedUser, counted: Bool) throws {
            try marks.measure(if: counted) { try relay.receiveDatagram(sealed, from: user.address) }
        }

        mutating func takeId() -> UInt64 {
            defer { nextId += 1 }
            return nextId
        }

        /// The one datagram the relay sent, opened by `user`'s opener; an error for none, another
        /// recipient, more than one, or another message.
        func expectDatagram(to user: EmbeddedUser, opener: inout DatagramOpener, kind: SIMPMessage.Kind, messageId: UInt64) throws {
            guard let envelope = try relay.datagrams.readOutbound(as: AddressedEnvelope<ByteBuffer>.self) else {
                throw WorkloadError("the relay sent no datagram for \(kind) \(messageId)")
            }
            guard envelope.remoteAddress == user.address else { throw WorkloadError("\(kind) \(messageId) went to \(envelope.remoteAddress)") }
            let message = try MessageCodec.decode(try opener.open(envelope.data).payload)
            guard message.kind == kind, message.messageId == messageId else { throw WorkloadError("expected \(kind) \(messageId), got \(message)") }
            if let more = try relay.datagrams.readOutbound(as: AddressedEnvelope<ByteBuffer>.self) {
                throw WorkloadError("the relay sent a second datagram, to \(more.remoteAddress)")
            }
        }

        mutating func datagramToOnlineUser(counted: Bool) throws {
            let id = takeId()
            let sealed = alice.sealer.seal(SIMPMessage(kind: .text, messageId: id, fromUser: "alice", toUser: "bob", content: content))
            try receive(sealed, from: alice, counted: counted)
            try expectDatagram(to: bob, opener: &bob.opener, kind: .text, messageId: id)
        }

        mutating func receiptDatagram(counted: Bool) throws {
            let id = takeId()
            let sealed = bob.sealer.seal(SIMPMessage(kind: .receipt, messageId: id, fromUser: "bob", toUser: "alice"))
            try receive(sealed, from: bob, counted: counted)
            try expectDatagram(to: alice, opener: &alice.opener, kind: .receipt, messageId: id)
        }

        mutating func receiptFrame(counted: Bool) throws {
            let id = takeId()
            var frame = ByteBuffer()
            Framing.writeFrame(SIMPMessage(kind: .receipt, messageId: id, fromUser: "bob", toUser: "alice"), into: &frame)
            try marks.measure(if: counted) { try relay.receive(frame, on: bob.control) }
            let forwarded = try relay.read(from: alice.control)
            guard forwarded?.kind == .receipt, forwarded?.messageId == id else {
                throw WorkloadError("expected receipt \(id) on alice's connection, got \(String(describing: forwarded))")
            }
        }

        mutating func fileChunk(counted: Bool) throws {
            let index = takeId()
            // A chunk's sealed bytes as the file's key leaves them: the relay never reads them.
            let sealed = (0..<(1100 + FileChunkCipher.overhead)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(index)) }
            let chunk = SIMPMessage.fileChunk(sealed, index: index, number: index, fileId: 7, from: "alice", to: "bob")
            try receive(alice.sealer.seal(chunk), from: alice, counted: counted)
            guard let envelope = try relay.datagrams.readOutbound(as: AddressedEnvelope<ByteBuffer>.self), envelope.remoteAddress == bob.address
            else { throw WorkloadError("FILE_CHUNK \(index) was not forwarded to bob") }
            let forwarded = try MessageCodec.decode(try bob.opener.open(envelope.data).payload)
            guard forwarded.kind == .fileChunk, forwarded.chunkIndex == index, forwarded.chunk == sealed else {
                throw WorkloadError("expected FILE_CHUNK \(index), got \(forwarded)")
            }
        }

        mutating func datagramToOfflineUser(counted: Bool) throws {
            let id = takeId()
            let stored = relay.statistics.inboxStored
            let sealed = alice.sealer.seal(SIMPMessage(kind: .text, messageId: id, fromUser: "alice", toUser: "carol", content: content))
            try receive(sealed, from: alice, counted: counted)
            guard relay.statistics.inboxStored == stored + 1 else { throw WorkloadError("TEXT \(id) to carol (offline) was not stored") }
            while let answer = try relay.read(from: alice.control) {
                guard answer.kind == .receipt else { throw WorkloadError("alice was told \(answer) for a stored message") }
            }
            if let datagram = try relay.datagrams.readOutbound(as: AddressedEnvelope<ByteBuffer>.self) {
                throw WorkloadError("a datagram to \(datagram.remoteAddress) for a message to an offline user")
            }
        }
    }
}
