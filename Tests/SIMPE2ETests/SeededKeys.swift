import SIMPCore
import SIMPE2E

/// Keys made from a seed, the same on every run: a device's identity and a user's signing key.
enum SeededKeys {
    static func identity(_ seed: UInt64) -> IdentityKey {
        var random = SplitMix64(seed: seed)
        return DeviceIdentity(using: &random).publicKey
    }

    static func userKey(_ seed: UInt64) -> UserSigningKey {
        var random = SplitMix64(seed: seed)
        return UserSigningKey(using: &random)
    }
}
