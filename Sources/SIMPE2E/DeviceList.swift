import Crypto

/// A user's signing key (docs/E2E.md §3.4): an Ed25519 key the user's first device makes; it
/// signs the list of the user's approved devices. Peers pin its public half and encrypt only to
/// devices a list signed by it names. Persist `secretBytes` (mode 0600); its description is
/// redacted.
public struct UserSigningKey: Sendable, RedactedReflection {
    let key: Curve25519.Signing.PrivateKey

    /// Makes a user key from `random` (32 bytes of seed).
    public init(using random: inout some RandomNumberGenerator) {
        key = try! Curve25519.Signing.PrivateKey(rawRepresentation: random.bytes(32))
    }

    /// Restores a user key from `secretBytes` (version 1: 0x01 ‖ Ed25519 seed).
    public init(secretBytes: [UInt8]) throws {
        var reader = ByteReader(secretBytes, reading: "user signing key")
        try reader.expectVersion(1)
        key = try Curve25519.Signing.PrivateKey(rawRepresentation: try reader.key())
        try reader.expectEnd()
    }

    /// The 33-byte persistent form.
    public var secretBytes: SecretBytes { SecretBytes([1] + Array(key.rawRepresentation)) }

    /// The Ed25519 public key (32 bytes) peers pin.
    public var publicKey: [UInt8] { Array(key.publicKey.rawRepresentation) }

    public var description: String { "UserSigningKey(private key redacted)" }
}

/// One device a device list approves: its name and the identity it had when approved.
public struct ApprovedDevice: Equatable, Sendable {
    public let device: String
    public let identity: IdentityKey

    public init(device: String, identity: IdentityKey) {
        self.device = device
        self.identity = identity
    }
}

/// A user's device list signed by the user's key (docs/E2E.md §3.4):
/// `0x01 ‖ user key (32) ‖ str16(user) ‖ u64 counter ‖ u16 n ‖ n × (str16(device) ‖ IK (64)) ‖
/// signature (64)`, the signature `Sign(user key, "SIMP-E2E v1 device list" ‖ every byte before
/// it)`. Devices are sorted by name (bytes), each name once. A list decodes only when its
/// signature verifies with the key it carries; whether that key is the one a peer pinned is
/// `DeviceListPin`'s decision.
public struct SignedDeviceList: Equatable, Sendable {
    /// The context string signed before the list's bytes.
    public static let context = Array("SIMP-E2E v1 device list".utf8)
    /// Most devices one list may name (the relay's cap on a user's devices is lower).
    public static let maxDevices = 64
    /// The largest list that can be encoded: 64 devices with 64-byte names.
    public static let maxEncodedSize = 1 + 32 + 2 + 255 + 8 + 2 + maxDevices * (2 + 64 + 64) + 64

    public let userKey: [UInt8]
    public let user: String
    /// Higher than every earlier list of this user key: a peer never takes a list whose counter
    /// is not above the one it holds (an old list cannot be replayed as newer).
    public let counter: UInt64
    public let devices: [ApprovedDevice]
    public let signature: [UInt8]
    /// The bytes as encoded (kept so that the same list re-encodes byte for byte).
    public let encoded: [UInt8]

    /// Signs a list of `devices` of `user` with `key`.
    public static func signed(user: String, counter: UInt64, devices: [ApprovedDevice], by key: UserSigningKey) throws -> SignedDeviceList {
        let sorted = devices.sorted { Array($0.device.utf8).lexicographicallyPrecedes(Array($1.device.utf8)) }
        var writer = ByteWriter()
        writer.u8(1)
        writer.raw(key.publicKey)
        writer.lengthPrefixed(Array(user.utf8))
        writer.u64(counter)
        writer.u16(UInt16(clamping: sorted.count))
        for device in sorted {
            writer.lengthPrefixed(Array(device.device.utf8))
            writer.raw(device.identity.encoded)
        }
        let signature = Array(try key.key.signature(for: context + writer.bytes))
        return try SignedDeviceList(encoded: writer.bytes + signature)
    }

    /// Decodes and checks a list: version 1, exact length, a usable user key, names sorted and
    /// unique, at most `maxDevices`, and a signature that verifies with the list's own key.
    /// - Throws: `E2EError.malformed`, `.unsupportedVersion`, `.invalidKey`, `.authenticationFailed`.
    public init(encoded: [UInt8]) throws {
        try self.init(encoded: encoded, verifying: true)
    }

    /// Decodes a list; `verifying` false skips the signature (and small-order) check, for a list
    /// this device checked when it kept it (its own store), so a message sealed does not pay
    /// for an Ed25519 verification.
    init(encoded: [UInt8], verifying: Bool) throws {
        guard encoded.count <= Self.maxEncodedSize else { throw E2EError.malformed("device list: \(encoded.count) bytes") }
        var reader = ByteReader(encoded, reading: "device list")
        try reader.expectVersion(1)
        userKey = try reader.key()
        guard !verifying || PublicKeyCheck.isUsableSigningKey(userKey) else { throw E2EError.invalidKey("user key (small order)") }
        user = try reader.lengthPrefixedUTF8()
        counter = try reader.u64()
        let count = Int(try reader.u16())
        guard count <= Self.maxDevices else { throw E2EError.malformed("device list: \(count) devices, at most \(Self.maxDevices)") }
        var devices: [ApprovedDevice] = []
        for _ in 0..<count {
            let name = try reader.lengthPrefixedUTF8()
            if let last = devices.last, !Array(last.device.utf8).lexicographicallyPrecedes(Array(name.utf8)) {
                throw E2EError.malformed("device list: devices not sorted, or \"\(name)\" twice")
            }
            devices.append(ApprovedDevice(device: name, identity: try IdentityKey(reading: &reader)))
        }
        let signed = reader.offset
        signature = try reader.raw(64)
        try reader.expectEnd()
        if verifying {
            guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: userKey),
                key.isValidSignature(signature, for: Self.context + Array(encoded[..<signed]))
            else { throw E2EError.authenticationFailed }
        }
        self.devices = devices
        self.encoded = encoded
    }

    /// Whether the list approves `device` with `identity`.
    public func approves(device: String, identity: IdentityKey) -> Bool {
        devices.contains { $0.device == device && $0.identity == identity }
    }

    /// This list with `device` (identity `identity`) added or its identity replaced, counter + 1.
    public func adding(_ device: ApprovedDevice, by key: UserSigningKey) throws -> SignedDeviceList {
        try .signed(user: user, counter: counter + 1, devices: devices.filter { $0.device != device.device } + [device], by: key)
    }

    /// This list without `device`, counter + 1.
    public func removing(_ device: String, by key: UserSigningKey) throws -> SignedDeviceList {
        try .signed(user: user, counter: counter + 1, devices: devices.filter { $0.device != device }, by: key)
    }
}
