import Crypto
import NIOCore

/// The keys of one session, derived from its secret: one per direction, so a datagram can never
/// be reflected back to the side that sealed it.
public struct SessionKeys: Sendable {
    /// The id every sealed datagram of the session carries.
    public let sessionId: UInt64
    /// Client → relay.
    let uplink: SymmetricKey
    /// Relay → client.
    let downlink: SymmetricKey

    /// Derives both keys from the session secret (HKDF-SHA256, salted with the session id).
    public init(sessionId: UInt64, secret: [UInt8]) {
        self.sessionId = sessionId
        var salt: [UInt8] = []
        withUnsafeBytes(of: sessionId.bigEndian) { salt.append(contentsOf: $0) }
        func derive(_ label: String) -> SymmetricKey {
            HKDF<SHA256>.deriveKey(
                inputKeyMaterial: SymmetricKey(data: secret), salt: salt,
                info: Array("simp v1 \(label)".utf8), outputByteCount: 32)
        }
        self.uplink = derive("uplink")
        self.downlink = derive("downlink")
    }
}

/// Which way a sealed datagram travels.
public enum DatagramDirection: Sendable {
    case uplink, downlink
}

/// The sealed datagram format (docs/PROTOCOL.md §5.1):
///
///     marker 0xA1 (1 byte) | session id (8, big-endian) | counter (8, big-endian)
///     | payload (a protobuf Message) | MAC (16)
///
/// The MAC is HMAC-SHA256 over everything before it, truncated to 16 bytes, with the key of
/// the datagram's direction.
public enum SealedDatagram {
    public static let marker: UInt8 = 0xA1
    public static let headerSize = 17
    public static let macSize = 16
    /// Bytes a seal adds to a payload.
    public static let overhead = headerSize + macSize

    /// The session id of a sealed datagram, read without checking anything else.
    public static func sessionId(of bytes: ByteBuffer) -> UInt64? {
        guard bytes.readableBytes >= overhead, bytes.getInteger(at: bytes.readerIndex, as: UInt8.self) == marker else { return nil }
        return bytes.getInteger(at: bytes.readerIndex + 1, as: UInt64.self)
    }

    /// The payload of a sealed datagram, NOT verified: for tools that look at traffic (the
    /// payload is authenticated, not encrypted). Receivers use `DatagramOpener`.
    public static func unverifiedPayload(of bytes: ByteBuffer) -> ByteBuffer? {
        guard sessionId(of: bytes) != nil else { return nil }
        return bytes.getSlice(at: bytes.readerIndex + headerSize, length: bytes.readableBytes - overhead)
    }

    static func key(_ keys: SessionKeys, _ direction: DatagramDirection) -> SymmetricKey {
        direction == .uplink ? keys.uplink : keys.downlink
    }

    static func mac(of bytes: UnsafeRawBufferPointer, key: SymmetricKey) -> HMAC<SHA256>.MAC {
        HMAC<SHA256>.authenticationCode(for: bytes, using: key)
    }
}

/// Seals the datagrams one side sends in one direction of a session, counting up from 1.
public struct DatagramSealer: Sendable {
    public let sessionId: UInt64
    private let key: SymmetricKey
    /// The counter the next datagram carries.
    public private(set) var nextCounter: UInt64 = 1

    public init(keys: SessionKeys, direction: DatagramDirection) {
        self.sessionId = keys.sessionId
        self.key = SealedDatagram.key(keys, direction)
    }

    /// Seals encoded message bytes (all readable bytes of `payload`).
    public mutating func seal(payload: ByteBuffer, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var out = allocator.buffer(capacity: payload.readableBytes + SealedDatagram.overhead)
        writeHeader(into: &out)
        var payload = payload
        out.writeBuffer(&payload)
        appendMAC(to: &out)
        return out
    }

    /// Encodes and seals `message`.
    public mutating func seal(_ message: SIMPMessage, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var out = allocator.buffer(capacity: MessageCodec.encodedSize(of: message) + SealedDatagram.overhead)
        writeHeader(into: &out)
        MessageCodec.encode(message, into: &out)
        appendMAC(to: &out)
        return out
    }

    private mutating func writeHeader(into out: inout ByteBuffer) {
        out.writeInteger(SealedDatagram.marker)
        out.writeInteger(sessionId)
        out.writeInteger(nextCounter)
        nextCounter += 1
    }

    private func appendMAC(to out: inout ByteBuffer) {
        let mac = out.withUnsafeReadableBytes { SealedDatagram.mac(of: $0, key: key) }
        _ = mac.withUnsafeBytes { out.writeBytes(UnsafeRawBufferPointer(rebasing: $0.prefix(SealedDatagram.macSize))) }
    }
}

/// Why a sealed datagram was refused.
public enum OpenFailure: Error, Equatable, Sendable {
    /// Too short, or not a sealed datagram.
    case notSealed
    /// Sealed for another session.
    case wrongSession
    /// The MAC does not match: forged or corrupted.
    case badMAC
    /// Its counter was seen before, or is older than the replay window.
    case replayed
}

/// Checks the datagrams one side receives in one direction of a session: MAC, then counter
/// against a sliding replay window (after the MAC passed, so forgeries cannot move it).
public struct DatagramOpener: Sendable {
    public let sessionId: UInt64
    private let key: SymmetricKey
    private var window: DedupeWindow

    /// What an authentic datagram carried.
    public struct Opened: Sendable {
        /// The protobuf Message bytes.
        public var payload: ByteBuffer
        public var counter: UInt64
        /// Whether no datagram with a higher counter was accepted before: only such a datagram
        /// may move the peer's address (newest authentic source wins).
        public var isNewest: Bool
    }

    public init(keys: SessionKeys, direction: DatagramDirection, replayWindow: UInt64 = 1024) {
        self.sessionId = keys.sessionId
        self.key = SealedDatagram.key(keys, direction)
        self.window = DedupeWindow(size: replayWindow)
    }

    /// The highest counter accepted so far (0 before the first).
    public var highestCounter: UInt64 { window.highest }

    /// Verifies `bytes` and records its counter.
    public mutating func open(_ bytes: ByteBuffer) throws(OpenFailure) -> Opened {
        guard let session = SealedDatagram.sessionId(of: bytes) else { throw .notSealed }
        guard session == sessionId else { throw .wrongSession }
        let start = bytes.readerIndex
        let macStart = start + bytes.readableBytes - SealedDatagram.macSize
        let authentic = bytes.withUnsafeReadableBytes { raw -> Bool in
            let expected = SealedDatagram.mac(of: UnsafeRawBufferPointer(rebasing: raw[..<(macStart - start)]), key: key)
            let received = UnsafeRawBufferPointer(rebasing: raw[(macStart - start)...])
            return expected.withUnsafeBytes { Self.constantTimeEqual(UnsafeRawBufferPointer(rebasing: $0.prefix(SealedDatagram.macSize)), received) }
        }
        guard authentic else { throw .badMAC }
        let counter = bytes.getInteger(at: start + 9, as: UInt64.self)!
        guard counter > 0 else { throw .replayed }
        let isNewest = counter > window.highest
        guard window.accept(counter) == .deliver else { throw .replayed }
        let payload = bytes.getSlice(at: start + SealedDatagram.headerSize, length: macStart - start - SealedDatagram.headerSize)!
        return Opened(payload: payload, counter: counter, isNewest: isNewest)
    }

    private static func constantTimeEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<a.count { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}
