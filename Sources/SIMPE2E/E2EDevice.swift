/// What a received prekey message means for the user (docs/E2E.md §7.3).
public enum SessionEvent: Equatable, Sendable {
    /// First session with this peer device.
    case newSession
    /// The peer device started over with the same identity (its state was lost or restored
    /// from a backup): "-- bob's device started a new session".
    case peerRestartedSession
    /// The peer device's identity differs from the one known before (reinstalled, or a key
    /// substituted): show it, and mark a verified peer unverified.
    case peerIdentityChanged
}

/// A decrypted pairwise message and, if it started a session, what that means for the user.
public struct Decrypted: Equatable, Sendable {
    public let plaintext: [UInt8]
    public let event: SessionEvent?
}

/// A device's end-to-end state: identity, prekeys, and its pairwise sessions by peer device
/// name. Sans-I/O: the caller passes time and randomness; every change is saved through the
/// injected store before a call returns.
public struct E2EDevice: RedactedReflection {
    public let identity: DeviceIdentity
    public private(set) var prekeys: DevicePrekeys
    private let store: E2EStateStore
    private let decoded = DecodedSessions()

    /// Loads the identity and prekeys from `store`, or makes and saves new ones (first run).
    public init(store: E2EStateStore, using random: inout some RandomNumberGenerator) throws {
        self.store = store
        if let saved = try store.load("identity") {
            identity = try DeviceIdentity(secretBytes: saved)
        } else {
            identity = DeviceIdentity(using: &random)
            try store.save("identity", identity.secretBytes)
        }
        if let saved = try store.load("prekeys") {
            prekeys = try DevicePrekeys(secretBytes: saved)
        } else {
            prekeys = DevicePrekeys(identity: identity, using: &random)
            try store.save("prekeys", prekeys.secretBytes)
        }
    }

    /// A bundle to publish with `count` new one-time prekeys.
    public mutating func publishBundle(oneTimePrekeys count: Int, using random: inout some RandomNumberGenerator) throws -> KeyBundle {
        let fresh = prekeys.makeOneTimePrekeys(count, using: &random)
        try store.save("prekeys", prekeys.secretBytes)
        return prekeys.bundle(identity: identity, oneTimePrekeys: fresh)
    }

    /// Replaces the signed prekey by a new one (docs/E2E.md §3.2); the previous one is still
    /// accepted for session starts made with it, the one before it is forgotten.
    public mutating func rotateSignedPrekey(using random: inout some RandomNumberGenerator) throws {
        prekeys.rotateSignedPrekey(identity: identity, using: &random)
        try store.save("prekeys", prekeys.secretBytes)
    }

    /// Offers post-quantum session starts from now on: makes a signed ML-KEM-768 prekey that
    /// later bundles carry (1,252 more bytes per bundle, 1,092 more per prekey message).
    public mutating func makeKEMPrekey(using random: inout some RandomNumberGenerator) throws {
        prekeys.makeKEMPrekey(identity: identity, using: &random)
        try store.save("prekeys", prekeys.secretBytes)
    }

    /// Whether a session with `peer` exists (else fetch its bundle and `startSession`).
    public func hasSession(with peer: String) throws -> Bool { try sessions(with: peer) != nil }

    /// The identity of `peer` in the current session, for safety numbers.
    public func identity(of peer: String) throws -> IdentityKey? { try sessions(with: peer)?.current.remoteIdentity }

    /// Starts a new session with `peer` from its bundle; it becomes the one messages go out on.
    /// - Parameter isRecovery: this device lost or distrusts its earlier state (for instance it
    ///   was restored from a backup: a restored session must never send, as it would reuse keys).
    /// - Returns: `.peerIdentityChanged` when the bundle's identity differs from the known one.
    @discardableResult
    public mutating func startSession(
        with peer: String, bundle: KeyBundle, isRecovery: Bool = false,
        using random: inout some RandomNumberGenerator
    ) throws -> SessionEvent? {
        let session = try RatchetSession.initiate(identity: identity, bundle: bundle, isRecovery: isRecovery, using: &random)
        let known = try sessions(with: peer)
        var record = known ?? PeerSessions(current: session)
        if known != nil { record.install(session) }
        try save(record, for: peer)
        guard let known else { return nil }
        return known.current.remoteIdentity == bundle.identity ? nil : .peerIdentityChanged
    }

    /// Whether the sessions with `peer` are a copy of what this device saved (its store says so:
    /// restored from a backup, or copied from another machine). They must not send: start a
    /// new session with `isRecovery` first (docs/E2E.md §7.3).
    public func sessionIsCopy(with peer: String) throws -> Bool {
        try hasSession(with: peer) && store.isCopy("peer/" + peer)
    }

    /// Encrypts `plaintext` for `peer` with the current session (never one that is a copy).
    public mutating func encrypt(_ plaintext: [UInt8], to peer: String) throws -> [UInt8] {
        guard var record = try sessions(with: peer) else { throw E2EError.noSession("no session with \(peer): fetch its key bundle") }
        guard try !store.isCopy("peer/" + peer) else {
            throw E2EError.noSession("the session with \(peer) was restored from a copy of this device's state: start a new one")
        }
        let cached = decoded.sessions[peer]
        let payload = try record.current.encrypt(plaintext, nextChainKey: cached?.reservation?.chainKey(after: record.current))
        if let cached, let reservation = cached.reservation, reservation.covers(record.current) {
            decoded.sessions[peer] = (cached.bytes, record, reservation) // stored ahead of this key: nothing to write
        } else {
            try save(record, for: peer, keys: .more)
        }
        return payload
    }

    /// Writes each session whose stored copy is ahead of the keys it used (reserved, §15) as
    /// it is, so that the next process of this device goes on from the next key unused (the
    /// client does this when it closes; a process that ends without it skips the rest).
    public func releaseReservedKeys() throws {
        for (peer, cached) in decoded.sessions where cached.reservation?.covers(cached.record.current) == true {
            guard try store.load("peer/" + peer) == cached.bytes else { continue } // not what this device holds now
            try save(cached.record, for: peer, keys: .released)
        }
    }

    /// Decrypts a pairwise payload from `peer`: a prekey message of a known session, or one
    /// that starts a new session (reported in `event`), or a ratchet message of the current or
    /// an earlier session. `E2EError.duplicate` means it was decrypted before: drop it.
    public mutating func decrypt(
        _ payload: [UInt8], from peer: String, now: UInt64, limits: E2ELimits = .standard,
        using random: inout some RandomNumberGenerator
    ) throws -> Decrypted {
        let message = try PairwiseMessage(encoded: payload)
        let known = try sessions(with: peer)
        if let start = message.start, known?.index(ofBaseKey: start.baseKey, initiator: start.initiator) == nil {
            return try acceptNewSession(message, start: start, known: known, from: peer, now: now, limits: limits, using: &random)
        }
        guard var record = known else { throw E2EError.noSession("ratchet message from \(peer), no session with it") }
        var firstError: Error?
        for (index, candidate) in record.all.enumerated() {
            var session = candidate
            do {
                let plaintext = try session.decrypt(message, now: now, limits: limits, using: &random)
                record.promote(session, from: index)
                try save(record, for: peer)
                return Decrypted(plaintext: plaintext, event: nil)
            } catch E2EError.duplicate {
                throw E2EError.duplicate
            } catch {
                firstError = firstError ?? error
            }
        }
        throw firstError ?? E2EError.authenticationFailed
    }

    private mutating func acceptNewSession(
        _ message: PairwiseMessage, start: SessionStartFields, known: PeerSessions?,
        from peer: String, now: UInt64, limits: E2ELimits,
        using random: inout some RandomNumberGenerator
    ) throws -> Decrypted {
        var session = try RatchetSession.respond(identity: identity, prekeys: prekeys, start: start)
        let plaintext = try session.decrypt(message, now: now, limits: limits, using: &random)
        if let id = start.oneTimePrekeyID {
            prekeys.consumeOneTimePrekey(id: id)
            try store.save("prekeys", prekeys.secretBytes)
        }
        var record = known ?? PeerSessions(current: session)
        if known != nil { record.install(session) }
        try save(record, for: peer)
        return Decrypted(plaintext: plaintext, event: Self.event(for: start, replacing: known?.current))
    }

    /// A fresh start from a peer that we had an established session with is a restart even if
    /// it could not say so (state lost entirely); one that crosses our own unanswered start is not.
    private static func event(for start: SessionStartFields, replacing earlier: RatchetSession?) -> SessionEvent? {
        guard let earlier else { return .newSession }
        if earlier.remoteIdentity != start.initiator { return .peerIdentityChanged }
        let crossedOurOwnStart = earlier.isInitiator && earlier.isAwaitingReply
        return start.isRecovery || !crossedOurOwnStart ? .peerRestartedSession : nil
    }

    public var description: String { "E2EDevice(\(identity.publicKey), keys redacted)" }

    /// The sessions with `peer`, decoded once: while the store holds the very bytes decoded
    /// (or saved) last, they are not decoded again.
    private func sessions(with peer: String) throws -> PeerSessions? {
        guard let bytes = try store.load("peer/" + peer) else { return nil }
        if let cached = decoded.sessions[peer], cached.bytes == bytes { return cached.record } // same buffer: no comparing
        let record = try PeerSessions(secretBytes: bytes)
        decoded.sessions[peer] = (bytes, record, nil)
        return record
    }

    /// What a save does with the sending keys reserved (`SendingReservation`, docs/E2E.md §15).
    private enum ReservedKeys {
        /// The current session's sending chain is stored as far as the keys reserved on it.
        case kept
        /// More keys are reserved first (it just sent with the last key covered).
        case more
        /// The session is stored as it is: the next process goes on from the next key unused.
        case released
    }

    /// Saves `record`, its current session's sending chain as `keys` says.
    private func save(_ record: PeerSessions, for peer: String, keys: ReservedKeys = .kept) throws {
        var reservation = decoded.sessions[peer]?.reservation
        switch keys {
        case .kept: break
        case .more: reservation = record.current.reserveSendingKeys(after: reservation)
        case .released: reservation = nil
        }
        let bytes = record.secretBytes(reserving: reservation)
        try store.save("peer/" + peer, bytes)
        decoded.sessions[peer] = (bytes.bytes, record, reservation)
    }
}

/// The sessions an `E2EDevice` decoded or saved last, with the bytes they came from or went to
/// (shared by the device's copies: a value is only used while the store still holds its bytes),
/// and the sending keys reserved in those bytes: `record` may be ahead of `bytes` by keys the
/// reservation covers.
final class DecodedSessions: @unchecked Sendable { // used with its device only
    var sessions: [String: (bytes: [UInt8], record: PeerSessions, reservation: SendingReservation?)] = [:]
}
