import Crypto

/// Key generation draws from an injected `RandomNumberGenerator`: `SystemRandomNumberGenerator`
/// (the operating system's cryptographic generator) in clients, a scripted one in the test
/// vectors. Every private key this module makes is 32 bytes read this way, little end of each
/// `next()` first.
extension RandomNumberGenerator {
    /// `count` random bytes, eight per `next()`, each `UInt64` taken little-endian.
    mutating func bytes(_ count: Int) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(count + 7)
        while result.count < count {
            let word = next()
            for shift in stride(from: 0, to: 64, by: 8) { result.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
        return Array(result.prefix(count))
    }

    /// A new X25519 private key from 32 random bytes.
    mutating func agreementKey() -> Curve25519.KeyAgreement.PrivateKey {
        // 32 bytes are always a valid X25519 private key (clamped on use).
        try! Curve25519.KeyAgreement.PrivateKey(rawRepresentation: bytes(32))
    }
}
