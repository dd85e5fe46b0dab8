import SIMPCore
import SIMPE2E

/// Real signed device lists (docs/E2E.md §3.4) for tests of the relay, which refuses at publish
/// time a list that does not decode, is not signed by the key it carries, or names another user.
public enum SignedDeviceLists {
    /// `user`'s list approving `devices` (each with an identity made from its position), signed
    /// by a user key made from `seed`.
    public static func list(user: String, devices: [String], seed: UInt64, counter: UInt64 = 1) -> [UInt8] {
        var random = SplitMix64(seed: seed)
        let key = UserSigningKey(using: &random)
        let approved = devices.map { ApprovedDevice(device: $0, identity: DeviceIdentity(using: &random).publicKey) }
        return try! SignedDeviceList.signed(user: user, counter: counter, devices: approved, by: key).encoded
    }
}
