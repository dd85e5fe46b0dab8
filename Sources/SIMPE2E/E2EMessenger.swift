/// What the user is told about a peer's devices (docs/E2E.md §7.3, §11.2).
public enum E2ENotice: Equatable, Sendable {
    /// A device of `user` not seen before, once its devices were known: "-- bob has a new device: laptop-3fa2".
    case newDevice(user: String, device: String)
    /// A known device of `user` has a different identity key (reinstalled, or a key substituted).
    case deviceKeyChanged(user: String, device: String)
    /// A device of `user` started a new session (its state was lost or restored from a backup).
    case sessionRestarted(user: String, device: String)
}

/// One user's end-to-end messaging across devices (docs/E2E.md §11), sans-I/O: pairwise
/// sessions with every device of each peer user (a message is encrypted once per receiving
/// device, into one envelope), the peers' device lists, and what is new about them. The
/// caller fetches key bundles (an I/O step) and passes them to `updateDevices`; everything is
/// saved through the injected store before a call returns.
public struct E2EMessenger: RedactedReflection {
    /// This device's name, written into every envelope it seals.
    public let device: String
    public internal(set) var local: E2EDevice
    let store: E2EStateStore
    private let decodedDevices = DecodedDeviceLists()

    /// Loads (or, on first run, makes and saves) this device's identity and prekeys.
    public init(device: String, store: E2EStateStore, using random: inout some RandomNumberGenerator) throws {
        self.device = device
        self.store = store
        local = try E2EDevice(store: store, using: &random)
    }

    /// Makes `count` new one-time prekeys (their private halves saved) to publish.
    public mutating func publishPrekeys(_ count: Int, using random: inout some RandomNumberGenerator) throws -> [OneTimePrekey] {
        try local.publishBundle(oneTimePrekeys: count, using: &random).oneTimePrekeys
    }

    /// Replaces the signed prekey (the previous one stays accepted): the next bundle published
    /// carries the new one.
    public mutating func rotateSignedPrekey(using random: inout some RandomNumberGenerator) throws {
        try local.rotateSignedPrekey(using: &random)
    }

    /// The devices of `peer` messages are encrypted for, with their identities (decoded once
    /// while the store holds the same bytes).
    public func devices(of peer: String) throws -> [PeerDevice] {
        guard let bytes = try store.load("devices/" + peer) else { return [] }
        if let cached = decodedDevices.lists[peer], cached.bytes == bytes { return cached.devices } // same buffer: no comparing
        let devices = try PeerDevice.decodeList(bytes)
        decodedDevices.lists[peer] = (bytes, devices)
        return devices
    }

    /// When the client closes: the sending keys reserved ahead and not used are given back
    /// (docs/E2E.md §15), so that the next process goes on from the next key unused.
    public func releaseReservedKeys() throws {
        try local.releaseReservedKeys()
    }

    /// Takes the bundles the relay handed out for `peer`'s devices: a session starts with each
    /// new device and each device whose identity changed; devices no longer listed are no
    /// longer sent to. Returns what to tell the user (nothing on first contact).
    public mutating func updateDevices(
        of peer: String, bundles: [(device: String, bundle: KeyBundle)], using random: inout some RandomNumberGenerator
    ) throws -> [E2ENotice] {
        let known = try devices(of: peer)
        var notices: [E2ENotice] = []
        var updated: [PeerDevice] = []
        for (name, bundle) in bundles {
            let session = Self.sessionName(peer, name)
            let earlier = known.first { $0.device == name }
            if try local.identity(of: session) != bundle.identity {
                try bundle.verify()
                try local.startSession(with: session, bundle: bundle, using: &random)
                if earlier != nil {
                    notices.append(.deviceKeyChanged(user: peer, device: name))
                } else if !known.isEmpty {
                    notices.append(.newDevice(user: peer, device: name))
                }
            }
            updated.append(PeerDevice(device: name, identity: bundle.identity))
        }
        try saveDevices(updated, of: peer)
        return notices
    }

    /// Encrypts `plaintext` once for every known device of `peer` (throws `noSession` when none).
    public mutating func seal(_ plaintext: [UInt8], to peer: String) throws -> [UInt8] {
        let devices = try devices(of: peer)
        guard !devices.isEmpty else { throw E2EError.noSession("\(peer) has no device with a key bundle") }
        let copies = try devices.map { ($0.device, try local.encrypt(plaintext, to: Self.sessionName(peer, $0.device))) }
        return E2EEnvelope(senderDevice: device, copies: copies).encoded
    }

    /// Decrypts this device's copy in an envelope from `peer`. A device of `peer` heard from
    /// for the first time becomes one that replies go to.
    /// - Throws: `E2EError.noSession` when the envelope has no copy for this device (it was
    ///   sealed before the sender knew it), `.duplicate` for a copy decrypted before.
    public mutating func open(
        _ envelope: [UInt8], from peer: String, now: UInt64, using random: inout some RandomNumberGenerator
    ) throws -> (plaintext: [UInt8], notices: [E2ENotice]) {
        try open(try E2EEnvelope(encoded: envelope), from: peer, now: now, using: &random)
    }

    /// `open` of an envelope decoded already.
    mutating func open(
        _ decoded: E2EEnvelope, from peer: String, now: UInt64, using random: inout some RandomNumberGenerator
    ) throws -> (plaintext: [UInt8], notices: [E2ENotice]) {
        guard let copy = decoded.copies.first(where: { $0.device == device })?.payload else {
            throw E2EError.noSession("the message was not encrypted for this device (\(device)); the sender did not know it yet")
        }
        let sender = decoded.senderDevice
        let decrypted = try local.decrypt(copy, from: Self.sessionName(peer, sender), now: now, using: &random)
        var known = try devices(of: peer)
        var notices: [E2ENotice] = []
        switch decrypted.event {
        case .peerIdentityChanged?: notices.append(.deviceKeyChanged(user: peer, device: sender))
        case .peerRestartedSession?: notices.append(.sessionRestarted(user: peer, device: sender))
        case .newSession?, nil: break
        }
        if let identity = try local.identity(of: Self.sessionName(peer, sender)), !known.contains(where: { $0.device == sender }) {
            if !known.isEmpty { notices.append(.newDevice(user: peer, device: sender)) }
            known.append(PeerDevice(device: sender, identity: identity))
            try saveDevices(known, of: peer)
        }
        return (decrypted.plaintext, notices)
    }

    /// The safety number with `peer`'s device `device` (nil without a session with it).
    public func safetyNumber(localUser: String, peer: String, device: String) throws -> String? {
        try local.identity(of: Self.sessionName(peer, device)).map {
            SafetyNumber.compute(localUser: localUser, localIdentity: local.identity.publicKey, remoteUser: peer, remoteIdentity: $0)
        }
    }

    /// The name of the pairwise session with `peer`'s device `device` in the store.
    static func sessionName(_ peer: String, _ device: String) -> String { peer + "/" + device }

    private func saveDevices(_ devices: [PeerDevice], of peer: String) throws {
        try store.save("devices/" + peer, SecretBytes(PeerDevice.encodeList(devices)))
    }

    public var description: String { "E2EMessenger(\(device), keys redacted)" }
}

/// The device lists an `E2EMessenger` decoded last, with the bytes they came from.
final class DecodedDeviceLists: @unchecked Sendable { // used with its messenger only
    var lists: [String: (bytes: [UInt8], devices: [PeerDevice])] = [:]
}

/// A peer's device as this device knows it.
public struct PeerDevice: Equatable, Sendable {
    public let device: String
    public let identity: IdentityKey

    /// Version 1: u16 count, then each as lengthPrefixed(device) ‖ identity (64).
    static func encodeList(_ devices: [PeerDevice]) -> [UInt8] {
        var writer = ByteWriter()
        writer.u8(1)
        writer.u16(UInt16(devices.count))
        for device in devices {
            writer.lengthPrefixed(Array(device.device.utf8))
            writer.raw(device.identity.encoded)
        }
        return writer.bytes
    }

    static func decodeList(_ bytes: [UInt8]) throws -> [PeerDevice] {
        var reader = ByteReader(bytes, reading: "peer devices")
        try reader.expectVersion(1)
        let devices = try (0..<(try reader.u16())).map { _ in
            PeerDevice(device: String(decoding: try reader.lengthPrefixed(), as: UTF8.self), identity: try IdentityKey(reading: &reader))
        }
        try reader.expectEnd()
        return devices
    }
}
