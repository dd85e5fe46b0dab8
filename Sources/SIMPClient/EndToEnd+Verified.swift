import Foundation
import SIMPE2E

/// Peers the user marked verified (`/verify NAME --confirm`, `simp keys --with NAME --confirm`,
/// docs/E2E.md §10): the identity of each of their devices at that moment, kept in `$SIMP_HOME`
/// (file `verified/<peer>`, mode 0600). When a device of such a peer is new or has another key,
/// nothing is sent to the peer (direct messages, posts to rooms it is in) until the user accepts
/// the change (`/verify NAME --accept`, `simp keys --with NAME --accept`: the peer is then not
/// verified) or verifies again; the user is told once per process
/// (`EndToEndNotice.verifiedKeyChanged`).
final class VerifiedPeers {
    /// peer → what was verified; nil when not verified. Loaded on first use.
    fileprivate var identities: [String: VerifiedIdentities?] = [:]
    /// Peers whose safety number changed since their last message here (unverified peers
    /// included): that message is marked (`MessageOrigin.keyChanged`).
    var changedSinceLastMessage: Set<String> = []
}

extension EndToEnd {
    /// Marks `peer` verified with the devices this device knows now; returns how many (0:
    /// none known, nothing marked).
    func markVerified(_ peer: String) throws -> Int {
        let devices = try messenger.recipients(of: peer)
        guard !devices.isEmpty else { return 0 }
        let userKey = try messenger.pinnedDeviceList(of: peer)?.userKey
        try keepVerified(peer, VerifiedIdentities(devices.map { ($0.device, $0.identity) }, userKey: userKey))
        return devices.count
    }

    /// The user accepts `peer`'s changed keys without comparing them: `peer` is no longer
    /// verified, and messages to it go again. Returns whether `peer` was verified.
    func acceptKeyChange(of peer: String) throws -> Bool {
        let wasVerified = try verifiedIdentities(of: peer) != nil
        try keepVerified(peer, VerifiedIdentities([]))
        return wasVerified
    }

    private func keepVerified(_ peer: String, _ verified: VerifiedIdentities) throws {
        try store.save(Self.verifiedName(peer), SecretBytes(verified.encoded))
        try store.commit()
        verifiedPeers.identities[peer] = .some(verified.identities.isEmpty ? nil : verified)
        toldOnce.forget(.verificationLapsed(user: peer))
    }

    /// How `peer`'s devices known now compare with what the user verified (nil: not verified).
    func verificationCheck(for peer: String) throws -> VerificationCheck? {
        guard let verified = try verifiedIdentities(of: peer) else { return nil }
        // Devices a pinned user key does not approve get nothing, so they do not count.
        let userKey = try messenger.pinnedDeviceList(of: peer)?.userKey
        return verified.check(try messenger.recipients(of: peer).map { ($0.device, $0.identity) }, userKey: userKey)
    }

    /// Whether `peer` was verified and one of its devices is new or has another key since.
    func verificationLapsed(for peer: String) throws -> Bool {
        if case .changed? = try verificationCheck(for: peer) { true } else { false }
    }

    /// Throws `SIMPClientError.notEncryptable` naming the changed devices and how to accept
    /// them when `peer` was verified and a key changed since (`what`: the message or post).
    func refuseUnlessVerificationHolds(_ peer: String, what: String) throws {
        guard case .changed(let changed)? = try verificationCheck(for: peer) else { return }
        checkVerification(of: peer)
        let devices = changed.filter { $0 != "user key" }
        var change =
            devices.isEmpty ? "" : "the identity key of \(peer)'s device \(devices.joined(separator: ", ")) changed since (or the device is new)"
        if changed.contains("user key") { change += (change.isEmpty ? "" : ", and ") + "\(peer)'s user key changed since" }
        throw SIMPClientError.notEncryptable(
            "\(what): \(peer) is verified, and \(change); compare the safety numbers (simp keys --with \(peer)), then accept the new key with "
                + "`simp keys --with \(peer) --accept` (or /verify \(peer) --accept in simp chat), or --confirm after comparing")
    }

    /// Whether `peer`'s `device` is one the user verified with the identity it has now.
    func isVerified(_ peer: String, device: String) -> Bool {
        guard let verified = try? verifiedIdentities(of: peer),
            let identity = try? messenger.devices(of: peer).first(where: { $0.device == device })?.identity
        else { return false }
        return verified.isVerified(device: device, identity: identity)
    }

    /// Tells the user, once per process, that verified `peer` has a device or key not verified.
    func checkVerification(of peer: String) {
        guard !toldOnce.wasTold(.verificationLapsed(user: peer)), (try? verificationLapsed(for: peer)) == true else { return }
        _ = toldOnce.shouldTell(.verificationLapsed(user: peer))
        onNotice(.verifiedKeyChanged(user: peer))
    }

    /// Tells the user of `notice` about a peer; a changed key comes with the new safety number
    /// (once per change), and the peer's next message is marked.
    func tell(_ notice: E2ENotice) {
        guard case .deviceKeyChanged(let peer, let device) = notice else { return onNotice(.peer(notice)) }
        verifiedPeers.changedSinceLastMessage.insert(peer)
        let number = (try? messenger.safetyNumber(localUser: user, peer: peer, device: device)) ?? nil
        onNotice(.safetyNumberChanged(user: peer, device: device, number: number ?? "unknown"))
    }

    private func verifiedIdentities(of peer: String) throws -> VerifiedIdentities? {
        if let known = verifiedPeers.identities[peer] { return known }
        let loaded = try store.load(Self.verifiedName(peer)).map(VerifiedIdentities.init(encoded:))
        let verified = loaded?.identities.isEmpty == false ? loaded : nil
        verifiedPeers.identities[peer] = .some(verified)
        return verified
    }

    private static func verifiedName(_ peer: String) -> String { "verified/" + peer }
}
