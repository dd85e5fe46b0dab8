import Foundation
import SIMPE2E

/// Peers the user marked verified (`/verify NAME --confirm`, docs/E2E.md §10): the identity of
/// each of their devices at that moment, kept in `$SIMP_HOME` (file `verified/<peer>`, mode
/// 0600). When a device of such a peer is new or has another key, the user is told once per
/// process (`EndToEndNotice.verifiedKeyChanged`) until the peer is verified again.
final class VerifiedPeers {
    /// peer → device → identity (hex) when verified; nil when not verified. Loaded on first use.
    fileprivate var identities: [String: [String: String]?] = [:]
    /// Peers whose lapse the user was told of in this process.
    fileprivate var told: Set<String> = []
}

extension EndToEnd {
    /// Marks `peer` verified with the devices this device knows now; returns how many (0:
    /// none known, nothing marked).
    func markVerified(_ peer: String) throws -> Int {
        let devices = try messenger.devices(of: peer)
        guard !devices.isEmpty else { return 0 }
        let identities = Dictionary(devices.map { ($0.device, Self.hex($0.identity.encoded)) }) { $1 }
        let text = identities.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: "\n")
        try store.save(Self.verifiedName(peer), SecretBytes(Array(text.utf8)))
        try store.commit()
        verifiedPeers.identities[peer] = .some(identities)
        verifiedPeers.told.remove(peer)
        return devices.count
    }

    /// Whether `peer` was verified and one of its devices is new or has another key since.
    func verificationLapsed(for peer: String) throws -> Bool {
        guard let verified = try verifiedIdentities(of: peer) else { return false }
        return try messenger.devices(of: peer).contains { verified[$0.device] != Self.hex($0.identity.encoded) }
    }

    /// Tells the user, once per process, that verified `peer` has a device or key not verified.
    func checkVerification(of peer: String) {
        guard !verifiedPeers.told.contains(peer), (try? verificationLapsed(for: peer)) == true else { return }
        verifiedPeers.told.insert(peer)
        onNotice(.verifiedKeyChanged(user: peer))
    }

    private func verifiedIdentities(of peer: String) throws -> [String: String]? {
        if let known = verifiedPeers.identities[peer] { return known }
        let loaded = try store.load(Self.verifiedName(peer)).map { bytes in
            Dictionary(
                String(decoding: bytes, as: UTF8.self).split(separator: "\n").compactMap { line -> (String, String)? in
                    let parts = line.split(separator: " ")
                    return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
                }
            ) { $1 }
        }
        verifiedPeers.identities[peer] = .some(loaded)
        return loaded
    }

    private static func verifiedName(_ peer: String) -> String { "verified/" + peer }
    private static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
}
