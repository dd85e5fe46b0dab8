import SIMPCore
import SIMPE2E

/// Real key bundles for tests of the relay, which refuses at publish time a bundle that does
/// not decode, has a key of small order or a bad signature (docs/E2E.md §3.3).
public enum SignedBundles {
    /// A version 1 bundle as KEYS_PUBLISH carries it (167 bytes, no one-time prekeys), signed by
    /// a device identity made from `seed`.
    public static func published(seed: UInt64) -> [UInt8] {
        var random = SplitMix64(seed: seed)
        let identity = DeviceIdentity(using: &random)
        return DevicePrekeys(identity: identity, using: &random).bundle(identity: identity, oneTimePrekeys: []).encoded
    }

    /// A published one-time prekey (36 bytes: `id` ‖ an X25519 public key made from `id`).
    public static func prekey(_ id: UInt32) -> [UInt8] {
        var random = SplitMix64(seed: UInt64(id) &+ 0x5EED)
        let key = (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }
        return OneTimePrekey(id: id, publicKey: key).encoded
    }
}
