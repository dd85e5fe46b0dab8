import NIOCore
import SIMPCore
import XCTest

final class SealedDatagramTests: XCTestCase {
    private let keys = SessionKeys(sessionId: 0x0102_0304_0506_0708, secret: Array(0..<32))

    /// The example of docs/PROTOCOL.md §5.1, byte for byte: keys, nonce, associated data,
    /// ciphertext and tag (computed independently with Python's `cryptography` package when written).
    func testTheDocumentedExampleIsWhatTheSealerWrites() throws {
        var message = SIMPMessage(kind: .text, messageId: 300, fromUser: "alice", toUser: "bob", content: "hi", time: 1_700_000_000_000)
        message.attempt = 1
        XCTAssertEqual(
            Hex.encode(Array(MessageCodec.encode(message).readableBytesView)),
            "080110ac021880d095ffbc31220268693205616c6963653a03626f625001")
        XCTAssertEqual(
            keys.key(.uplink).withUnsafeBytes { Hex.encode(Array($0)) },
            "8acb0850d86e784378a3ddc33cb6df76d1d6215e8cf0ffe1d605f8f160a1cd59")
        XCTAssertEqual(
            keys.key(.downlink).withUnsafeBytes { Hex.encode(Array($0)) },
            "bc9c2c7ba66a88df0aa96b8aa8cf06117769752af05f0f8b12aad2bbc921434a")
        var sealer = DatagramSealer(keys: keys, direction: .uplink)

        let sealed = sealer.seal(message)

        let expected =
            "a201020304050607080000000000000001" // marker, session id, counter 1: the associated data
            + "f3f124438f33ece697891b8559c87b058bc61d9377f0a8779a47493d61aa" // ciphertext (30 bytes)
            + "a03d70f4e072d78bdb9066e85b41117b" // tag
        XCTAssertEqual(Hex.encode(Array(sealed.readableBytesView)), expected)
        var opener = DatagramOpener(keys: keys, direction: .uplink)
        let opened = try opener.open(ByteBuffer(bytes: Hex.decode(expected)!))
        XCTAssertEqual(try MessageCodec.decode(opened.payload), message)
        XCTAssertEqual(opened.counter, 1)
    }

    func testThePayloadIsNotInClear() throws {
        var sealer = DatagramSealer(keys: keys, direction: .uplink)
        let secret = "the secret plan for the weekend"
        let sealed = sealer.seal(SIMPMessage(kind: .text, messageId: 1, fromUser: "alice", toUser: "bob", content: secret))
        let wire = String(decoding: sealed.readableBytesView, as: UTF8.self)
        for word in [secret, "alice", "bob", "plan"] { XCTAssertFalse(wire.contains(word), word) }
        var opener = DatagramOpener(keys: keys, direction: .uplink)
        XCTAssertEqual(try MessageCodec.decode(opener.open(sealed).payload).content, secret)
        XCTAssertEqual(sealer.seal(payload: ByteBuffer()).readableBytes, SealedDatagram.overhead, "an empty payload")
    }

    func testOpeningInPlaceDecryptsInTheReceivedBuffer() throws {
        var sealer = DatagramSealer(keys: keys, direction: .downlink)
        var opener = DatagramOpener(keys: keys, direction: .downlink)
        let message = SIMPMessage(kind: .text, messageId: 9, fromUser: "alice", toUser: "bob", content: "in place")
        var received = sealer.seal(message)
        let copy = received
        let opened = try opener.open(inPlace: &received)
        XCTAssertEqual(try MessageCodec.decode(opened.payload), message)
        XCTAssertEqual(opened.counter, 1)
        XCTAssertNotEqual(copy, received, "the copy keeps the ciphertext; the opened buffer holds plaintext")
        XCTAssertThrowsError(try opener.open(copy), "the same datagram again") { XCTAssertEqual($0 as? OpenFailure, .replayed) }

        var tampered = sealer.seal(message)
        tampered.setInteger(tampered.getInteger(at: 20, as: UInt8.self)! ^ 0x80, at: 20)
        XCTAssertThrowsError(try opener.open(inPlace: &tampered)) { XCTAssertEqual($0 as? OpenFailure, .badMAC) }
        var empty = sealer.seal(payload: ByteBuffer())
        XCTAssertEqual(try opener.open(inPlace: &empty).payload.readableBytes, 0, "an empty payload, in place")
        XCTAssertEqual(try opener.open(sealer.seal(payload: ByteBuffer())).payload.readableBytes, 0, "and into a new buffer")
    }

    func testTheSameSealedBytesFromBothEntryPoints() throws {
        let message = SIMPMessage(kind: .text, messageId: 7, fromUser: "alice", toUser: "bob", content: "same")
        var first = DatagramSealer(keys: keys, direction: .downlink)
        var second = DatagramSealer(keys: keys, direction: .downlink)
        XCTAssertEqual(first.seal(message), second.seal(payload: MessageCodec.encode(message)))
    }

    func testOpeningChecksSessionMACAndCounter() throws {
        var sealer = DatagramSealer(keys: keys, direction: .uplink)
        var opener = DatagramOpener(keys: keys, direction: .uplink, replayWindow: 64)
        let first = sealer.seal(SIMPMessage(kind: .ping, fromUser: "a"))
        let second = sealer.seal(SIMPMessage(kind: .ping, fromUser: "a"))

        XCTAssertEqual(try opener.open(second).isNewest, true)
        XCTAssertEqual(try opener.open(first).isNewest, false, "late but authentic: accepted, not newest")
        XCTAssertThrowsError(try opener.open(first)) { XCTAssertEqual($0 as? OpenFailure, .replayed) }
        for offset in [5, 12, 20, second.readableBytes - 1] { // session id, counter, ciphertext, tag
            var tampered = sealer.seal(SIMPMessage(kind: .ping, fromUser: "a"))
            tampered.setInteger(tampered.getInteger(at: offset, as: UInt8.self)! ^ 0x01, at: offset)
            XCTAssertThrowsError(try opener.open(tampered), "byte \(offset) changed") {
                XCTAssertEqual($0 as? OpenFailure, offset == 5 ? .wrongSession : .badMAC)
            }
        }
        var downlink = DatagramOpener(keys: keys, direction: .downlink)
        XCTAssertThrowsError(try downlink.open(sealer.seal(SIMPMessage(kind: .ping))), "a reflected datagram") {
            XCTAssertEqual($0 as? OpenFailure, .badMAC)
        }
        var other = DatagramOpener(keys: SessionKeys(sessionId: 9, secret: Array(0..<32)), direction: .uplink)
        XCTAssertThrowsError(try other.open(sealer.seal(SIMPMessage(kind: .ping)))) { XCTAssertEqual($0 as? OpenFailure, .wrongSession) }
        XCTAssertThrowsError(try opener.open(ByteBuffer(bytes: [0xA2, 1, 2]))) { XCTAssertEqual($0 as? OpenFailure, .notSealed) }
        for _ in 0..<100 { _ = sealer.seal(SIMPMessage(kind: .ping)) }
        XCTAssertThrowsError(try opener.open(first), "older than the window") { XCTAssertEqual($0 as? OpenFailure, .replayed) }
    }

    func testHexRoundTrip() {
        XCTAssertEqual(Hex.decode(Hex.encode([0, 1, 0xab, 0xff])), [0, 1, 0xab, 0xff])
        XCTAssertNil(Hex.decode("abc"))
        XCTAssertNil(Hex.decode("zz"))
    }

    func testTokenBucketAdmitsTheBurstThenTheRate() {
        let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var limiter = RateLimiter<String>(RateLimit(perSecond: 10, burst: 3))
        XCTAssertEqual((0..<4).map { _ in limiter.admit("a", now: t0) == nil }, [true, true, true, false])
        let wait = limiter.admit("a", now: t0 + .milliseconds(50))?.nanoseconds ?? 0
        XCTAssertEqual(Double(wait) / 1e6, 50, accuracy: 1, "half a token in: 50 ms to go")
        XCTAssertNil(limiter.admit("a", now: t0 + .milliseconds(100)), "one token after 100 ms")
        XCTAssertNil(limiter.admit("b", now: t0), "per key")
        XCTAssertEqual(
            RateLimit(perSecond: 500, burst: 1000).scaled(toPerSecond: 50), RateLimit(perSecond: 50, burst: 100),
            "two seconds' worth stays two seconds' worth")
    }
}
