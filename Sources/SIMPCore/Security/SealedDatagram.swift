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

    /// The key of one direction.
    public func key(_ direction: DatagramDirection) -> SymmetricKey {
        direction == .uplink ? uplink : downlink
    }
}

/// Which way a sealed datagram travels.
public enum DatagramDirection: Sendable {
    case uplink, downlink
}

/// The sealed datagram format (docs/PROTOCOL.md §5.1):
///
///     marker 0xA2 (1 byte) | session id (8, big-endian) | counter (8, big-endian)
///     | ciphertext of the payload (a protobuf Message) | tag (16)
///
/// AES-256-GCM with the key of the datagram's direction, the nonce
/// `00 00 00 00 ‖ counter (8, big-endian)`, and the 17 header bytes as associated data.
public enum SealedDatagram {
    /// Version 2 of the seal (0xA1 was the HMAC seal, which did not encrypt).
    public static let marker: UInt8 = 0xA2
    public static let headerSize = 17
    public static let tagSize = 16
    /// Bytes a seal adds to a payload.
    public static let overhead = headerSize + tagSize
    /// The largest datagram a relay accepts unless configured otherwise (CONNECTED says when
    /// it is otherwise).
    public static let defaultMaxDatagramSize = 8192

    /// The session id of a sealed datagram, read without checking anything else.
    public static func sessionId(of bytes: ByteBuffer) -> UInt64? {
        guard bytes.readableBytes >= overhead, bytes.getInteger(at: bytes.readerIndex, as: UInt8.self) == marker else { return nil }
        return bytes.getInteger(at: bytes.readerIndex + 1, as: UInt64.self)
    }

    /// The AEAD nonce for `counter`: four zero bytes, then the counter big-endian. A direction's
    /// counter never repeats within a session, and each session and direction has its own key.
    static func nonce(_ counter: UInt64) -> AES.GCM.Nonce {
        // Three 4-byte words (no padding between them) on the stack; 12 bytes cannot fail.
        withUnsafeBytes(of: nonceWords(counter)) { try! AES.GCM.Nonce(data: $0) }
    }

    /// The nonce's bytes as three big-endian words: 0, then the counter's high and low halves.
    public static func nonceWords(_ counter: UInt64) -> (UInt32, UInt32, UInt32) {
        (0, UInt32(truncatingIfNeeded: counter >> 32).bigEndian, UInt32(truncatingIfNeeded: counter).bigEndian)
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
        self.key = keys.key(direction)
    }

    /// Seals encoded message bytes (all readable bytes of `payload`).
    public mutating func seal(payload: ByteBuffer, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var out = allocator.buffer(capacity: payload.readableBytes + SealedDatagram.overhead)
        writeHeader(into: &out)
        var payload = payload
        out.writeBuffer(&payload)
        encryptInPlace(&out)
        return out
    }

    /// Encodes and seals `message`.
    public mutating func seal(_ message: SIMPMessage, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var out = allocator.buffer(capacity: MessageCodec.encodedSize(of: message) + SealedDatagram.overhead)
        writeHeader(into: &out)
        MessageCodec.encode(message, into: &out)
        encryptInPlace(&out)
        return out
    }

    private func writeHeader(into out: inout ByteBuffer) {
        out.writeInteger(SealedDatagram.marker)
        out.writeInteger(sessionId)
        out.writeInteger(nextCounter)
    }

    /// `out` holds the header and the plaintext: replaces the plaintext with its ciphertext and
    /// appends the tag, then advances the counter.
    private mutating func encryptInPlace(_ out: inout ByteBuffer) {
        let nonce = SealedDatagram.nonce(nextCounter)
        nextCounter += 1
        let box = out.withUnsafeReadableBytes { raw in
            // AES-GCM fails only for a wrong key or nonce size, both fixed here.
            try! AES.GCM.seal(
                UnsafeRawBufferPointer(rebasing: raw.dropFirst(SealedDatagram.headerSize)), using: key, nonce: nonce,
                authenticating: UnsafeRawBufferPointer(rebasing: raw.prefix(SealedDatagram.headerSize)))
        }
        out.moveWriterIndex(to: out.readerIndex + SealedDatagram.headerSize)
        box.ciphertext.withUnsafeBytes { _ = out.writeBytes($0) }
        box.tag.withUnsafeBytes { _ = out.writeBytes($0) }
    }
}

/// Why a sealed datagram was refused.
public enum OpenFailure: Error, Equatable, Sendable {
    /// Too short, or not a sealed datagram.
    case notSealed
    /// Sealed for another session.
    case wrongSession
    /// The tag does not match: forged, corrupted, or sealed with another key.
    case badMAC
    /// Its counter was seen before, or is older than the replay window.
    case replayed
}

/// Checks the datagrams one side receives in one direction of a session: decrypts and
/// authenticates, then checks the counter against a sliding replay window (after the tag
/// passed, so forgeries cannot move it).
public struct DatagramOpener: Sendable {
    public let sessionId: UInt64
    private let key: SymmetricKey
    private var window: DedupeWindow

    /// What an authentic datagram carried.
    public struct Opened: Sendable {
        /// The protobuf Message bytes, decrypted.
        public var payload: ByteBuffer
        public var counter: UInt64
        /// Whether no datagram with a higher counter was accepted before: only such a datagram
        /// may move the peer's address (newest authentic source wins).
        public var isNewest: Bool
    }

    public init(keys: SessionKeys, direction: DatagramDirection, replayWindow: UInt64 = 1024) {
        self.sessionId = keys.sessionId
        self.key = keys.key(direction)
        self.window = DedupeWindow(size: replayWindow)
    }

    /// The highest counter accepted so far (0 before the first).
    public var highestCounter: UInt64 { window.highest }

    /// Authenticates and decrypts `bytes`, and records its counter.
    public mutating func open(_ bytes: ByteBuffer) throws(OpenFailure) -> Opened {
        guard let session = SealedDatagram.sessionId(of: bytes) else { throw .notSealed }
        guard session == sessionId else { throw .wrongSession }
        let counter = bytes.getInteger(at: bytes.readerIndex + 9, as: UInt64.self)!
        guard counter > 0 else { throw .replayed }
        let plaintext = bytes.withUnsafeReadableBytes { raw -> ByteBuffer? in
            let header = UnsafeRawBufferPointer(rebasing: raw.prefix(SealedDatagram.headerSize))
            let sealed = raw.dropFirst(SealedDatagram.headerSize)
            guard let box = try? AES.GCM.SealedBox(
                nonce: SealedDatagram.nonce(counter),
                ciphertext: UnsafeRawBufferPointer(rebasing: sealed.dropLast(SealedDatagram.tagSize)),
                tag: UnsafeRawBufferPointer(rebasing: sealed.suffix(SealedDatagram.tagSize))),
                let opened = try? AES.GCM.open(box, using: key, authenticating: header) else { return nil }
            return ByteBuffer(bytes: opened)
        }
        guard let plaintext else { throw .badMAC }
        let isNewest = counter > window.highest
        guard window.accept(counter) == .deliver else { throw .replayed }
        return Opened(payload: plaintext, counter: counter, isNewest: isNewest)
    }
}
