import NIOCore
import SIMPE2E

/// Approving this user's devices (docs/E2E.md §3.4).
extension SIMPClient {
    /// Approves this user's device `name`: signs, with the user key this device holds, a new
    /// device list that includes `name` with the identity its bundle at the relay has, and
    /// publishes it. Peers who pinned the user key then encrypt to `name` too. Returns the
    /// devices the new list approves.
    /// With `code`, only if the keys the relay serves as `name` have that device code (the one
    /// the device shows, `SafetyNumber.deviceCode`).
    /// - Throws: `SIMPClientError.notEncryptable` when this device does not hold the user key,
    ///   `name` has no keys at the relay, or they do not have `code`.
    public func approveDevice(_ name: String, code: String? = nil) async throws -> [String] {
        try await onEngine { engine -> EventLoopFuture<[String]> in
            guard let endToEnd = engine.endToEnd else { throw SIMPClientError.notEncryptable("end-to-end encryption is off") }
            return endToEnd.approveDevice(name, code: code, via: engine).map { $0.devices.map(\.device) }
        }
    }

    /// The device code (`SafetyNumber.deviceCode`) of the keys the relay serves as this user's
    /// device `name`: what that device should show, if they are its keys.
    public func deviceCode(of name: String) async throws -> String {
        try await onEngine { engine -> EventLoopFuture<String> in
            guard let endToEnd = engine.endToEnd else { throw SIMPClientError.notEncryptable("end-to-end encryption is off") }
            return endToEnd.ownDeviceIdentity(name, via: engine).map { SafetyNumber.deviceCode(user: endToEnd.user, identity: $0) }
        }
    }

    /// Removes this user's device `name` from the device list (signed with the user key this
    /// device holds, and published): peers stop encrypting to it. Returns the devices the new
    /// list approves.
    public func removeDevice(_ name: String) async throws -> [String] {
        try await onEngine { engine -> EventLoopFuture<[String]> in
            guard let endToEnd = engine.endToEnd else { throw SIMPClientError.notEncryptable("end-to-end encryption is off") }
            return endToEnd.removeDevice(name, via: engine).map { $0.devices.map(\.device) }
        }
    }

    /// Makes a new user key on this device and publishes a device list of this device alone
    /// (after the device holding the old key was lost). Every peer that pinned the old key is
    /// told the user key changed; the user's other devices must be approved again.
    public func resetUserKey() async throws {
        try await onEngine { engine -> EventLoopFuture<Void> in
            guard let endToEnd = engine.endToEnd else { throw SIMPClientError.notEncryptable("end-to-end encryption is off") }
            return endToEnd.makeUserKey(via: engine).map { _ in }
        }
    }

    /// The devices this user's device list approves, as this device last signed it (nil: this
    /// device does not hold the user key).
    public func approvedDevices() async throws -> [String]? {
        try await onEngine(now: { engine in try engine.endToEnd?.ownDeviceList()?.devices.map(\.device) })
    }
}
