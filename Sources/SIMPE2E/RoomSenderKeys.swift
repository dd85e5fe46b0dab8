/// One device's sender keys for one room (docs/E2E.md §8): its own outbound key, re-made
/// whenever membership changes so a member who left cannot read later posts (and a member who
/// joined cannot read earlier ones), and the inbound keys of the other members' devices.
public struct RoomSenderKeys: Sendable, RedactedReflection {
    public let roomID: String
    /// The member devices (as the caller names them) that get this device's sender key.
    public internal(set) var members: Set<String>
    public internal(set) var outbound: OutboundSenderKey
    /// Inbound keys by sender device, oldest first; a few per sender so posts in flight across a
    /// re-key still decrypt.
    var inbound: [String: [InboundSenderKey]] = [:]
    /// Inbound keys kept per sender device.
    public static let keysPerSender = 3

    /// Starts with a fresh sender key; send `outbound.distribution` to every member.
    public init(roomID: String, members: Set<String>, using random: inout some RandomNumberGenerator) {
        self.roomID = roomID
        self.members = members
        outbound = OutboundSenderKey(roomID: roomID, using: &random)
    }

    /// Applies a membership change. When it changed, makes a new sender key, forgets the keys of
    /// devices that left, and returns the distribution to send (pairwise) to every current member.
    public mutating func updateMembers(_ newMembers: Set<String>, using random: inout some RandomNumberGenerator) -> SenderKeyDistribution? {
        guard newMembers != members else { return nil }
        for departed in members.subtracting(newMembers) { inbound[departed] = nil }
        members = newMembers
        outbound = OutboundSenderKey(roomID: roomID, using: &random)
        return outbound.distribution
    }

    /// Encrypts one post with this device's sender key.
    public mutating func encrypt(_ plaintext: [UInt8]) -> [UInt8] { outbound.encrypt(plaintext) }

    /// Keeps a sender key received from `sender` (over the pairwise session with it).
    public mutating func accept(_ distribution: SenderKeyDistribution, from sender: String) throws {
        guard distribution.roomID == roomID else { throw E2EError.malformed("sender key for room \(distribution.roomID), not \(roomID)") }
        var keys = inbound[sender, default: []]
        guard !keys.contains(where: { $0.keyID == distribution.keyID }) else { return }
        keys.append(InboundSenderKey(distribution))
        inbound[sender] = Array(keys.suffix(Self.keysPerSender))
    }

    /// Decrypts a post from `sender`.
    public mutating func decrypt(_ payload: [UInt8], from sender: String, now: UInt64, limits: E2ELimits = .standard) throws -> [UInt8] {
        let message = try RoomMessage(encoded: payload)
        guard let index = inbound[sender]?.firstIndex(where: { $0.keyID == message.keyID }) else {
            throw E2EError.noSession("room \(roomID): no sender key \(message.keyID) from \(sender)")
        }
        return try inbound[sender]![index].decrypt(message, now: now, limits: limits)
    }

    public var description: String { "RoomSenderKeys(room \(roomID), \(members.count) members, keys redacted)" }
}
