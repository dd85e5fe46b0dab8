import NIOCore
import SIMPCore
import XCTest

final class SealedDatagramTests: XCTestCase {
    private let keys = SessionKeys(sessionId: 0x0102_0304_0506_0708, secret: Array(0..<32))

    /// The example of docs/PROTOCOL.md §5.1, byte for byte.
    func testTheDocumentedExampleIsWhatTheSealerWrites() {
        var message = SIMPMessage(kind: .text, messageId: 300, fromUser: "alice", toUser: "bob", content: "hi", time: 1_700_000_000_000)
        message.attempt = 1
        var sealer = DatagramSealer(keys: keys, direction: .uplink)

        let sealed = sealer.seal(message)

        XCTAssertEqual(Hex.encode(Array(sealed.readableBytesView)),
                       "a101020304050607080000000000000001080110ac021880d095ffbc31220268693205616c6963653a03626f6250012c637c17d7ad221f787d6d6cb01a1529")
    }

    func testOpeningChecksSessionMACAndCounter() throws {
        var sealer = DatagramSealer(keys: keys, direction: .uplink)
        var opener = DatagramOpener(keys: keys, direction: .uplink, replayWindow: 64)
        let first = sealer.seal(SIMPMessage(kind: .ping, fromUser: "a"))
        let second = sealer.seal(SIMPMessage(kind: .ping, fromUser: "a"))

        XCTAssertEqual(try opener.open(second).isNewest, true)
        XCTAssertEqual(try opener.open(first).isNewest, false, "late but authentic: accepted, not newest")
        XCTAssertThrowsError(try opener.open(first)) { XCTAssertEqual($0 as? OpenFailure, .replayed) }
        var tampered = second
        tampered.setInteger(UInt8(0xff), at: 20)
        XCTAssertThrowsError(try opener.open(tampered)) { XCTAssertEqual($0 as? OpenFailure, .badMAC) }
        var downlink = DatagramOpener(keys: keys, direction: .downlink)
        XCTAssertThrowsError(try downlink.open(sealer.seal(SIMPMessage(kind: .ping))), "a reflected datagram") {
            XCTAssertEqual($0 as? OpenFailure, .badMAC)
        }
        var other = DatagramOpener(keys: SessionKeys(sessionId: 9, secret: Array(0..<32)), direction: .uplink)
        XCTAssertThrowsError(try other.open(sealer.seal(SIMPMessage(kind: .ping)))) { XCTAssertEqual($0 as? OpenFailure, .wrongSession) }
        XCTAssertThrowsError(try opener.open(ByteBuffer(bytes: [0xA1, 1, 2]))) { XCTAssertEqual($0 as? OpenFailure, .notSealed) }
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
        XCTAssertEqual(RateLimit(perSecond: 500, burst: 1000).scaled(toPerSecond: 50), RateLimit(perSecond: 50, burst: 100),
                       "two seconds' worth stays two seconds' worth")
    }
}
