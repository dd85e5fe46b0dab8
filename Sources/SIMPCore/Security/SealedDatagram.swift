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
        bytes.withUnsafeReadableBytes { sessionId(of: $0) }
    }

    /// The session id of the sealed datagram `bytes`, read without checking anything else.
    static func sessionId(of bytes: UnsafeRawBufferPointer) -> UInt64? {
        guard bytes.count >= overhead, bytes[0] == marker else { return nil }
        return UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 1, as: UInt64.self))
    }

    /// The counter of the sealed datagram `bytes` (which has a session id, see `sessionId(of:)`).
    static func counter(of bytes: UnsafeRawBufferPointer) -> UInt64 {
        UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 9, as: UInt64.self))
    }

    /// Writes the header (`headerSize` bytes) at `out`.
    static func writeHeader(sessionId: UInt64, counter: UInt64, to out: UnsafeMutableRawPointer) {
        out.storeBytes(of: marker, as: UInt8.self)
        out.storeBytes(of: sessionId.bigEndian, toByteOffset: 1, as: UInt64.self)
        out.storeBytes(of: counter.bigEndian, toByteOffset: 9, as: UInt64.self)
    }

    /// The AEAD nonce for `counter` as three big-endian words: four zero bytes, then the counter's
    /// high and low halves (12 bytes, no padding between them). A direction's counter never
    /// repeats within a session, and each session and direction has its own key.
    public static func nonceWords(_ counter: UInt64) -> (UInt32, UInt32, UInt32) {
        (0, UInt32(truncatingIfNeeded: counter >> 32).bigEndian, UInt32(truncatingIfNeeded: counter).bigEndian)
    }
}

/// Seals the datagrams one side sends in one direction of a session, counting up from 1. The
/// key schedule is built once, at the first seal; each seal encrypts in the output buffer itself.
public struct DatagramSealer: Sendable {
    public let sessionId: UInt64
    private var key: LazyAEADKey
    /// The counter the next datagram carries.
    public private(set) var nextCounter: UInt64 = 1

    public init(keys: SessionKeys, direction: DatagramDirection) {
        self.sessionId = keys.sessionId
        self.key = LazyAEADKey(keys.key(direction))
    }

    /// Seals encoded message bytes (all readable bytes of `payload`): the header, the
    /// ciphertext and the tag are written into the new buffer in one pass.
    public mutating func seal(payload: ByteBuffer, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        let size = payload.readableBytes + SealedDatagram.overhead
        var out = allocator.buffer(capacity: size)
        let counter = takeCounter(), key = key.key(), sessionId = sessionId
        payload.withUnsafeReadableBytes { plaintext in
            _ = out.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { raw in
                Self.seal(plaintext, at: raw.baseAddress!, sessionId: sessionId, counter: counter, key: key)
                return size
            }
        }
        return out
    }

    /// Encodes and seals `message`: encoded after room for the header, then encrypted in place.
    public mutating func seal(_ message: SIMPMessage, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var out = allocator.buffer(capacity: MessageCodec.estimatedSize(of: message) + SealedDatagram.overhead)
        out.moveWriterIndex(forwardBy: SealedDatagram.headerSize) // the header, written below
        MessageCodec.encode(message, into: &out)
        let plaintextCount = out.readableBytes - SealedDatagram.headerSize
        _ = out.writeWithUnsafeMutableBytes(minimumWritableBytes: SealedDatagram.tagSize) { _ in SealedDatagram.tagSize }
        let counter = takeCounter(), key = key.key(), sessionId = sessionId
        out.withUnsafeMutableReadableBytes { raw in
            let text = UnsafeRawBufferPointer(start: raw.baseAddress! + SealedDatagram.headerSize, count: plaintextCount)
            Self.seal(text, at: raw.baseAddress!, sessionId: sessionId, counter: counter, key: key)
        }
        return out
    }

    /// The counter of the datagram being sealed; advances it.
    private mutating func takeCounter() -> UInt64 {
        defer { nextCounter += 1 }
        return nextCounter
    }

    /// Writes the header at `out` and the ciphertext of `plaintext` and its tag after it;
    /// `plaintext` is either right after the header (in place) or elsewhere.
    private static func seal(_ plaintext: UnsafeRawBufferPointer, at out: UnsafeMutableRawPointer, sessionId: UInt64, counter: UInt64, key: AEADKey) {
        SealedDatagram.writeHeader(sessionId: sessionId, counter: counter, to: out)
        withUnsafeBytes(of: SealedDatagram.nonceWords(counter)) { nonce in
            key.seal(
                plaintext, into: out + SealedDatagram.headerSize, nonce: nonce,
                associated: UnsafeRawBufferPointer(start: out, count: SealedDatagram.headerSize))
        }
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
    private var key: LazyAEADKey
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
        self.key = LazyAEADKey(keys.key(direction))
        self.window = DedupeWindow(size: replayWindow)
    }

    /// The highest counter accepted so far (0 before the first).
    public var highestCounter: UInt64 { window.highest }

    /// Authenticates and decrypts `bytes` into a new buffer, and records its counter.
    public mutating func open(_ bytes: ByteBuffer) throws(OpenFailure) -> Opened {
        let key = key.key(), sessionId = sessionId
        // One pass over the sealed bytes: header checks, then decryption into a new buffer.
        let opened = bytes.withUnsafeReadableBytes { sealed -> Result<(ByteBuffer, UInt64), OpenFailure> in
            let counter: UInt64
            switch Self.checkedCounter(of: sealed, sessionId: sessionId) {
            case .success(let value): counter = value
            case .failure(let failure): return .failure(failure)
            }
            // At least one byte, so that even an empty payload has an address to decrypt to.
            let capacity = max(1, sealed.count - SealedDatagram.overhead)
            var plaintext = ByteBufferAllocator().buffer(capacity: capacity)
            var authentic = false
            plaintext.writeWithUnsafeMutableBytes(minimumWritableBytes: capacity) { out in
                guard let written = Self.decrypt(sealed, into: out.baseAddress!, counter: counter, key: key) else { return 0 }
                authentic = true
                return written
            }
            return authentic ? .success((plaintext, counter)) : .failure(.badMAC)
        }
        let (plaintext, counter) = try opened.get()
        return try accept(plaintext, counter: counter)
    }

    /// Like `open(_:)`, but decrypts in `bytes`' own storage: no allocation when nothing else
    /// holds that storage (otherwise `ByteBuffer` copies it first). The payload is a slice of
    /// `bytes`. When the datagram is refused for its tag, `bytes` holds unspecified data.
    public mutating func open(inPlace bytes: inout ByteBuffer) throws(OpenFailure) -> Opened {
        let counter = try bytes.withUnsafeReadableBytes { Self.checkedCounter(of: $0, sessionId: sessionId) }.get()
        let key = key.key()
        let written = bytes.withUnsafeMutableReadableBytes { raw in
            Self.decrypt(UnsafeRawBufferPointer(raw), into: raw.baseAddress! + SealedDatagram.headerSize, counter: counter, key: key)
        }
        guard let written else { throw .badMAC }
        return try accept(bytes.getSlice(at: bytes.readerIndex + SealedDatagram.headerSize, length: written)!, counter: counter)
    }

    /// The counter of `bytes` if it is a datagram sealed for session `sessionId` (before its tag
    /// is checked).
    private static func checkedCounter(of bytes: UnsafeRawBufferPointer, sessionId: UInt64) -> Result<UInt64, OpenFailure> {
        guard let session = SealedDatagram.sessionId(of: bytes) else { return .failure(.notSealed) }
        guard session == sessionId else { return .failure(.wrongSession) }
        let counter = SealedDatagram.counter(of: bytes)
        return counter > 0 ? .success(counter) : .failure(.replayed)
    }

    /// Checks the tag of the whole datagram `sealed` and decrypts its ciphertext to `out`;
    /// the plaintext's length, or nil for a wrong tag.
    private static func decrypt(_ sealed: UnsafeRawBufferPointer, into out: UnsafeMutableRawPointer, counter: UInt64, key: AEADKey) -> Int? {
        // The caller checked that `sealed` holds a header (`checkedCounter`). Pointer arithmetic,
        // not `dropFirst`/`prefix`, which the optimizer left as calls (about 80 instructions).
        let header = sealed.baseAddress!
        return withUnsafeBytes(of: SealedDatagram.nonceWords(counter)) { nonce in
            key.open(
                UnsafeRawBufferPointer(start: header + SealedDatagram.headerSize, count: sealed.count - SealedDatagram.headerSize), into: out,
                nonce: nonce, associated: UnsafeRawBufferPointer(start: header, count: SealedDatagram.headerSize))
        }
    }

    /// Records an authentic datagram's counter in the replay window (after the tag passed, so
    /// forgeries cannot move it).
    private mutating func accept(_ payload: ByteBuffer, counter: UInt64) throws(OpenFailure) -> Opened {
        let isNewest = counter > window.highest
        guard window.accept(counter) == .deliver else { throw .replayed }
        return Opened(payload: payload, counter: counter, isNewest: isNewest)
    }
}
