import Crypto
import NIOCore
import SIMPCore

/// One way of sealing datagrams, as the relay uses it: open what a sender sealed, seal the
/// payload again for the receiver.
protocol BenchSeal {
    /// Seals encoded message bytes.
    mutating func seal(payload: ByteBuffer) -> ByteBuffer
    /// The payload of an authentic datagram; nil if it is not. The bench holds no other
    /// reference to `bytes`, so a seal may decrypt in its storage.
    mutating func open(_ bytes: inout ByteBuffer) -> ByteBuffer?
}

/// The seal in use (AES-256-GCM, docs/PROTOCOL.md §5.1), as the relay opens: into a new buffer.
struct AESGCMSeal: BenchSeal {
    var sealer: DatagramSealer
    var opener: DatagramOpener

    init(keys: SessionKeys) {
        sealer = DatagramSealer(keys: keys, direction: .uplink)
        opener = DatagramOpener(keys: keys, direction: .uplink)
    }

    mutating func seal(payload: ByteBuffer) -> ByteBuffer { sealer.seal(payload: payload) }
    mutating func open(_ bytes: inout ByteBuffer) -> ByteBuffer? { try? opener.open(bytes).payload }
}

/// The seal in use, opened in the received buffer itself (`DatagramOpener.open(inPlace:)`).
struct AESGCMInPlaceSeal: BenchSeal {
    var inUse: AESGCMSeal

    init(keys: SessionKeys) { inUse = AESGCMSeal(keys: keys) }

    mutating func seal(payload: ByteBuffer) -> ByteBuffer { inUse.seal(payload: payload) }
    mutating func open(_ bytes: inout ByteBuffer) -> ByteBuffer? { try? inUse.opener.open(inPlace: &bytes).payload }
}

/// The same AES-256-GCM seal through swift-crypto's one-shot API, as SIMP sealed until the key
/// schedule was kept per session: a BoringSSL context built per call, `Data` for the ciphertext,
/// the tag and the plaintext. Same bytes on the wire as `AESGCMSeal`.
struct OneShotAESGCMSeal: BenchSeal {
    let key: SymmetricKey
    var counter: UInt64 = 0
    var window = DedupeWindow(size: 1024)

    init(keys: SessionKeys) { key = keys.key(.uplink) }

    private static func nonce(_ counter: UInt64) -> AES.GCM.Nonce {
        withUnsafeBytes(of: SealedDatagram.nonceWords(counter)) { try! AES.GCM.Nonce(data: $0) }
    }

    mutating func seal(payload: ByteBuffer) -> ByteBuffer {
        counter += 1
        var out = ByteBufferAllocator().buffer(capacity: payload.readableBytes + SealedDatagram.overhead)
        out.writeInteger(SealedDatagram.marker)
        out.writeInteger(UInt64(1))
        out.writeInteger(counter)
        let box = out.withUnsafeReadableBytes { header in
            payload.withUnsafeReadableBytes { try! AES.GCM.seal($0, using: key, nonce: Self.nonce(counter), authenticating: header) }
        }
        box.ciphertext.withUnsafeBytes { _ = out.writeBytes($0) }
        box.tag.withUnsafeBytes { _ = out.writeBytes($0) }
        return out
    }

    mutating func open(_ bytes: inout ByteBuffer) -> ByteBuffer? {
        guard bytes.readableBytes >= 33, let counter = bytes.getInteger(at: bytes.readerIndex + 9, as: UInt64.self) else { return nil }
        let plaintext = bytes.withUnsafeReadableBytes { raw -> ByteBuffer? in
            guard
                let box = try? AES.GCM.SealedBox(
                    nonce: Self.nonce(counter), ciphertext: UnsafeRawBufferPointer(rebasing: raw[17..<(raw.count - 16)]),
                    tag: UnsafeRawBufferPointer(rebasing: raw.suffix(16))),
                let opened = try? AES.GCM.open(box, using: key, authenticating: UnsafeRawBufferPointer(rebasing: raw.prefix(17)))
            else { return nil }
            return ByteBuffer(bytes: opened)
        }
        guard let plaintext, window.accept(counter) == .deliver else { return nil }
        return plaintext
    }
}

/// The previous seal, for comparison only: the same header, the payload in clear, and the first
/// 16 bytes of HMAC-SHA-256 over header and payload (marker 0xA1).
struct HMACSeal: BenchSeal {
    let key: SymmetricKey
    var counter: UInt64 = 0
    var window = DedupeWindow(size: 1024)

    init(keys: SessionKeys) { key = keys.key(.uplink) }

    mutating func seal(payload: ByteBuffer) -> ByteBuffer {
        counter += 1
        var out = ByteBufferAllocator().buffer(capacity: payload.readableBytes + 33)
        out.writeInteger(UInt8(0xA1))
        out.writeInteger(UInt64(1))
        out.writeInteger(counter)
        var payload = payload
        out.writeBuffer(&payload)
        let mac = out.withUnsafeReadableBytes { HMAC<SHA256>.authenticationCode(for: $0, using: key) }
        mac.withUnsafeBytes { _ = out.writeBytes(UnsafeRawBufferPointer(rebasing: $0.prefix(16))) }
        return out
    }

    mutating func open(_ bytes: inout ByteBuffer) -> ByteBuffer? {
        let macStart = bytes.readableBytes - 16
        guard macStart >= 17, bytes.getInteger(at: bytes.readerIndex, as: UInt8.self) == 0xA1 else { return nil }
        let authentic = bytes.withUnsafeReadableBytes { raw in
            let expected = HMAC<SHA256>.authenticationCode(for: UnsafeRawBufferPointer(rebasing: raw.prefix(macStart)), using: key)
            return expected.withUnsafeBytes { mac in
                zip(mac.prefix(16), raw.suffix(16)).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
            }
        }
        guard authentic, let counter = bytes.getInteger(at: bytes.readerIndex + 9, as: UInt64.self),
            window.accept(counter) == .deliver
        else { return nil }
        return bytes.getSlice(at: bytes.readerIndex + 17, length: macStart - 17)
    }
}

/// The alternative AEAD, for comparison only: the same layout with ChaCha20-Poly1305 (marker 0xA3).
struct ChaChaPolySeal: BenchSeal {
    let key: SymmetricKey
    var counter: UInt64 = 0
    var window = DedupeWindow(size: 1024)

    init(keys: SessionKeys) { key = keys.key(.uplink) }

    private static func nonce(_ counter: UInt64) -> ChaChaPoly.Nonce {
        withUnsafeBytes(of: SealedDatagram.nonceWords(counter)) { try! ChaChaPoly.Nonce(data: $0) }
    }

    mutating func seal(payload: ByteBuffer) -> ByteBuffer {
        counter += 1
        var out = ByteBufferAllocator().buffer(capacity: payload.readableBytes + 33)
        out.writeInteger(UInt8(0xA3))
        out.writeInteger(UInt64(1))
        out.writeInteger(counter)
        let box = out.withUnsafeReadableBytes { header in
            payload.withUnsafeReadableBytes { try! ChaChaPoly.seal($0, using: key, nonce: Self.nonce(counter), authenticating: header) }
        }
        box.ciphertext.withUnsafeBytes { _ = out.writeBytes($0) }
        box.tag.withUnsafeBytes { _ = out.writeBytes($0) }
        return out
    }

    mutating func open(_ bytes: inout ByteBuffer) -> ByteBuffer? {
        guard bytes.readableBytes >= 33, let counter = bytes.getInteger(at: bytes.readerIndex + 9, as: UInt64.self) else { return nil }
        let plaintext = bytes.withUnsafeReadableBytes { raw -> ByteBuffer? in
            guard
                let box = try? ChaChaPoly.SealedBox(
                    nonce: Self.nonce(counter), ciphertext: UnsafeRawBufferPointer(rebasing: raw[17..<(raw.count - 16)]),
                    tag: UnsafeRawBufferPointer(rebasing: raw.suffix(16))),
                let opened = try? ChaChaPoly.open(box, using: key, authenticating: UnsafeRawBufferPointer(rebasing: raw.prefix(17)))
            else { return nil }
            return ByteBuffer(bytes: opened)
        }
        guard let plaintext, window.accept(counter) == .deliver else { return nil }
        return plaintext
    }
}
