/// Who this device hands its sender key for one room to (docs/E2E.md §8.4): the members the
/// room's own members admitted, not whoever the relay lists. Sans-I/O: the relay's member lists,
/// the user's admits and the admits other members sent arrive as calls with the time
/// (milliseconds since the Unix epoch); what the user must be told comes back as events.
///
/// - The first time this device posts to the room (or admits someone to it), every member the
///   relay lists then is admitted: the room's creator and the members present (trust on first
///   use, `firstUse`). Lists seen before that change nothing.
/// - A user the relay lists later who was not admitted is *waiting*: it gets no sender key, and
///   the user is told once (and again after `remindAfterMilliseconds` while it still waits).
/// - A member admits a user (`admit`); each other member accepts that admit when it comes, end
///   to end, from a member it admitted itself (`admitReceived`).
/// - A member the relay no longer lists is no longer admitted (it left, or was removed): joining
///   again by name makes it wait again.
public struct RoomAdmission: Equatable, Sendable {
    /// What the user is told.
    public enum Event: Equatable, Sendable {
        /// `user` joined by name and was not admitted by a member: it cannot read the posts.
        case waiting(user: String)
        /// `user` was admitted by `by` (this user, or a member whose admit arrived).
        case admitted(user: String, by: String)
    }

    /// How long a waiting user stays told before the user is told again (while listed).
    public static let remindAfterMilliseconds: UInt64 = 3_600_000

    public let roomID: String
    /// This device's user: always admitted.
    public let localUser: String
    /// The users admitted (by the first-use rule or by a member), this user included.
    public private(set) var admitted: Set<String>
    /// Listed but not admitted, with when the user was last told of each. Not kept across
    /// processes: a new process tells again.
    public private(set) var waiting: [String: UInt64] = [:]

    /// A room this device has not posted to yet: `firstUse` admits the members then listed.
    public init(roomID: String, localUser: String) {
        self.init(roomID: roomID, localUser: localUser, admitted: [])
    }

    init(roomID: String, localUser: String, admitted: Set<String>) {
        self.roomID = roomID
        self.localUser = localUser
        self.admitted = admitted
    }

    /// Whether this device used the room (posted to it, or admitted someone) since it joined.
    public var hasSeenRoom: Bool { !admitted.isEmpty }

    /// This device is about to post to the room, or admit someone to it, and the relay lists
    /// `members`: the first time, every one of them is admitted (and true is returned).
    @discardableResult
    public mutating func firstUse(_ members: [String]) -> Bool {
        guard !hasSeenRoom else { return false }
        admitted = Set(members).union([localUser])
        return true
    }

    /// The relay listed the room's `members` (this user among them) at `now`: a user not
    /// admitted is told of (once; again after `remindAfterMilliseconds`), an admitted one no
    /// longer listed is no longer admitted. Nothing before `firstUse`.
    public mutating func membersListed(_ members: [String], now: UInt64) -> [Event] {
        let listed = Set(members)
        guard hasSeenRoom else { return [] }
        admitted.formIntersection(listed.union([localUser]))
        waiting = waiting.filter { listed.contains($0.key) }
        var events: [Event] = []
        for user in listed.subtracting(admitted).sorted() {
            if let told = waiting[user], now >= told, now - told < Self.remindAfterMilliseconds { continue }
            waiting[user] = now
            events.append(.waiting(user: user))
        }
        return events
    }

    /// This user admits `user`; nil when it was admitted already. Send `RoomAdmit` to the other
    /// admitted members.
    public mutating func admit(_ user: String) -> Event? {
        guard admitted.insert(user).inserted else { return nil }
        waiting[user] = nil
        return .admitted(user: user, by: localUser)
    }

    /// `admit` came, end to end, from `sender`: taken when `sender` is admitted here (nil when
    /// not, or when `admit.user` was admitted already).
    public mutating func admitReceived(_ admit: RoomAdmit, from sender: String) -> Event? {
        guard admit.roomID == roomID, sender != localUser, admitted.contains(sender) else { return nil }
        guard admitted.insert(admit.user).inserted else { return nil }
        waiting[admit.user] = nil
        return .admitted(user: admit.user, by: sender)
    }

    /// The `members` (the relay's list) that get this device's sender key: those admitted,
    /// without this user.
    public func readers(among members: [String]) -> [String] {
        members.filter { $0 != localUser && admitted.contains($0) }
    }
}

/// An admit (docs/E2E.md §8.4), sent as the plaintext of a pairwise message to each admitted
/// member: `0x01 ‖ 0x28 ‖ str16(room id) ‖ str16(user)`. Its pairwise encryption authenticates
/// the admitting member's device, so a relay can neither forge nor alter one.
public struct RoomAdmit: Equatable, Sendable {
    public let roomID: String
    public let user: String

    public init(roomID: String, user: String) {
        self.roomID = roomID
        self.user = user
    }

    /// Whether a decrypted pairwise plaintext is an admit: it starts `0x01 0x28`.
    public static func isAdmit(_ plaintext: [UInt8]) -> Bool {
        plaintext.count >= 2 && plaintext[0] == 1 && plaintext[1] == E2EMessageType.roomAdmit.rawValue
    }

    public var encoded: [UInt8] {
        var writer = ByteWriter()
        writer.u8(1)
        writer.u8(E2EMessageType.roomAdmit.rawValue)
        writer.lengthPrefixed(Array(roomID.utf8))
        writer.lengthPrefixed(Array(user.utf8))
        return writer.bytes
    }

    public init(encoded: [UInt8]) throws {
        var reader = ByteReader(encoded, reading: "room admit")
        try reader.expectVersion(1)
        guard try reader.u8() == E2EMessageType.roomAdmit.rawValue else { throw E2EError.malformed("room admit: type is not 0x28") }
        roomID = try reader.lengthPrefixedUTF8()
        user = try reader.lengthPrefixedUTF8()
        try reader.expectEnd()
    }
}

extension RoomAdmission {
    /// The persistent form (docs/E2E.md §14.4, `admitted/<room id>`), version 1:
    /// `0x01 ‖ u16 n ‖ n × str16(admitted user)`, sorted. Waiting users are not kept.
    public var encoded: [UInt8] {
        var writer = ByteWriter()
        writer.u8(1)
        writer.u16(UInt16(min(admitted.count, Int(UInt16.max))))
        for user in admitted.sorted().prefix(Int(UInt16.max)) { writer.lengthPrefixed(Array(user.utf8)) }
        return writer.bytes
    }

    public init(roomID: String, localUser: String, encoded: [UInt8]) throws {
        var reader = ByteReader(encoded, reading: "room admission")
        try reader.expectVersion(1)
        let users = try (0..<(try reader.u16())).map { _ in try reader.lengthPrefixedUTF8() }
        try reader.expectEnd()
        self.init(roomID: roomID, localUser: localUser, admitted: Set(users))
    }
}
