/// The sessions with one peer device: the current one (used to send) and a few earlier ones,
/// kept so that messages still in flight from them decrypt after a new session started.
struct PeerSessions: Sendable {
    static let previousKept = 2

    var current: RatchetSession
    var previous: [RatchetSession] = []

    /// Makes `session` current, keeping the one it replaces among the previous ones.
    mutating func install(_ session: RatchetSession) {
        previous.insert(current, at: 0)
        if previous.count > Self.previousKept { previous.removeLast() }
        current = session
    }

    /// The session (current or previous) started with `baseKey` by `initiator`.
    func index(ofBaseKey baseKey: [UInt8], initiator: IdentityKey) -> Int? {
        all.firstIndex { $0.baseKey == baseKey && $0.remoteIdentity == initiator }
    }

    /// Current first, then previous, newest first.
    var all: [RatchetSession] { [current] + previous }

    /// Replaces the session at `index` of `all` and makes it current (the peer uses it).
    mutating func promote(_ session: RatchetSession, from index: Int) {
        if index == 0 { current = session; return }
        previous.remove(at: index - 1)
        install(session)
    }

    /// Version 1: u8 count, then each session as u32 length ‖ session state.
    var secretBytes: SecretBytes { secretBytes(reserving: nil) }

    /// The stored form: the current session's sending chain at `reservation`, when it covers
    /// it (`SendingReservation`).
    func secretBytes(reserving reservation: SendingReservation?) -> SecretBytes {
        var writer = ByteWriter()
        writer.u8(1)
        writer.u8(UInt8(all.count))
        for (index, session) in all.enumerated() {
            let bytes = (index == 0 ? session.stored(under: reservation) : session).secretBytes.bytes
            writer.u32(UInt32(bytes.count))
            writer.raw(bytes)
        }
        return SecretBytes(writer.bytes)
    }

    init(current: RatchetSession) { self.current = current }

    init(secretBytes: [UInt8]) throws {
        var reader = ByteReader(secretBytes, reading: "peer sessions")
        try reader.expectVersion(1)
        let sessions = try (0..<(try reader.u8())).map { _ in
            try RatchetSession(secretBytes: try reader.raw(Int(try reader.u32())))
        }
        try reader.expectEnd()
        guard let first = sessions.first else { throw E2EError.malformed("peer sessions: none") }
        current = first
        previous = Array(sessions.dropFirst())
    }
}
