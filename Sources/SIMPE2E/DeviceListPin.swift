/// What a sender does with the device list the relay served for a peer, given the list it
/// pinned before (docs/E2E.md §3.4): trust on first use of the user key, then only newer lists
/// signed by that key; a list with another key is a changed user key (a safety number change);
/// a missing or bad list never undoes a pin.
public enum DeviceListPin {
    /// The outcome of one served list.
    public enum Outcome: Equatable, Sendable {
        /// No user key pinned and none served: the peer's devices are trusted one by one, as
        /// before cross-signing.
        case noUserKey
        /// The first list seen for the peer: its key is pinned now.
        case pinned(SignedDeviceList)
        /// A newer list signed by the pinned key: it replaces the pinned one.
        case updated(SignedDeviceList)
        /// The list held, or an older one of the same key (a replay): nothing changes.
        case unchanged
        /// A list signed by another user key: pinned now in place of the old one, and the user is
        /// told the safety number changed (a verified peer is blocked until the user accepts).
        case userKeyChanged(SignedDeviceList)
        /// The relay served no list (or a bad one, `reason`) although a user key is pinned: the
        /// pinned list stays in force.
        case withdrawn(reason: String)
        /// The relay served a bad list and none is pinned: trusted one by one, as `noUserKey`.
        case invalid(reason: String)
    }

    /// Decides on `served` (the list's bytes; empty when the relay has none) for `user`, with
    /// `pinned` the list held for `user` (nil: none).
    public static func evaluate(served: [UInt8], for user: String, pinned: SignedDeviceList?) -> Outcome {
        if served.isEmpty { return pinned == nil ? .noUserKey : .withdrawn(reason: "the relay has no device list for \(user)") }
        let list: SignedDeviceList
        do {
            list = try SignedDeviceList(encoded: served)
            guard list.user == user else { throw E2EError.malformed("a device list of \(list.user), not of \(user)") }
        } catch {
            return pinned == nil ? .invalid(reason: "\(error)") : .withdrawn(reason: "\(error)")
        }
        guard let pinned else { return .pinned(list) }
        guard list.userKey == pinned.userKey else { return .userKeyChanged(list) }
        return list.counter > pinned.counter ? .updated(list) : .unchanged
    }

    /// The devices of `devices` messages may be encrypted to under `pinned`: all of them without
    /// a pinned list, else those it approves with the identity they have now; the others are
    /// `unapproved`.
    public static func split(_ devices: [PeerDevice], under pinned: SignedDeviceList?) -> (approved: [PeerDevice], unapproved: [PeerDevice]) {
        guard let pinned else { return (devices, []) }
        let approved = devices.filter { pinned.approves(device: $0.device, identity: $0.identity) }
        return (approved, devices.filter { !pinned.approves(device: $0.device, identity: $0.identity) })
    }
}

/// The peers' device lists in the messenger's store (`device-list/<peer>`: the pinned list's
/// bytes), and the devices a message goes to.
extension E2EMessenger {
    /// The list pinned for `peer` (nil: none seen, its devices are trusted one by one). Its
    /// signature was checked when it was pinned.
    public func pinnedDeviceList(of peer: String) throws -> SignedDeviceList? {
        try store.load(Self.deviceListName(peer)).map { try SignedDeviceList(encoded: $0, verifying: false) }
    }

    /// Takes the list the relay served for `peer` (`DeviceListPin.evaluate`); a list pinned,
    /// updated or changed is kept. Returns the outcome, for the caller to tell the user.
    @discardableResult
    public mutating func takeDeviceList(_ served: [UInt8], of peer: String) throws -> DeviceListPin.Outcome {
        let outcome = DeviceListPin.evaluate(served: served, for: peer, pinned: try pinnedDeviceList(of: peer))
        switch outcome {
        case .pinned(let list), .updated(let list), .userKeyChanged(let list):
            try store.save(Self.deviceListName(peer), SecretBytes(list.encoded))
        case .noUserKey, .unchanged, .withdrawn, .invalid: break
        }
        return outcome
    }

    /// The devices of `peer` a message is encrypted to: every known device when no user key is
    /// pinned for `peer`, else only those the pinned list approves.
    public func recipients(of peer: String) throws -> [PeerDevice] {
        DeviceListPin.split(try devices(of: peer), under: try pinnedDeviceList(of: peer)).approved
    }

    /// Known devices of `peer` that are left out because the pinned list does not approve them.
    public func unapprovedDevices(of peer: String) throws -> [PeerDevice] {
        DeviceListPin.split(try devices(of: peer), under: try pinnedDeviceList(of: peer)).unapproved
    }

    static func deviceListName(_ peer: String) -> String { "device-list/" + peer }
}
