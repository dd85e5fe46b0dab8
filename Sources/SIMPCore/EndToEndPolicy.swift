import NIOCore

/// A sender's end-to-end decisions (docs/PROTOCOL.md §4.8, "Sending"; docs/E2E.md §7.5),
/// sans-I/O: whether a receiver's device list must be fetched before a message is sealed,
/// what to do with the message once the relay answered (`KeyWait`), when a message or a room
/// post goes unencrypted (only by the user's choice, `--no-e2e`), and how often a new session may be
/// started with a peer device to ask for a message again. The shell (`SIMPClient`'s
/// `EndToEnd`) reports what happened, with the time, and carries out the answers; the state
/// lives here, in memory.
public struct EndToEndPolicy: Sendable {
    /// What the user chose and how long things last.
    public struct Settings: Sendable, Equatable {
        /// Send unencrypted to a receiver that has published no keys, or through a relay that
        /// keeps none, instead of waiting (`--no-e2e`).
        public var allowUnencrypted = false
        /// How long a fetched device list is used before it is fetched again.
        public var deviceListLifetime: TimeAmount = .minutes(5)
        /// At most one new session per peer device this long to ask for messages again,
        /// however many fail (a relay that forges undecryptable messages gets no more).
        public var newSessionInterval: TimeAmount = .seconds(60)

        public init(allowUnencrypted: Bool = false, deviceListLifetime: TimeAmount = .minutes(5)) {
            self.allowUnencrypted = allowUnencrypted
            self.deviceListLifetime = deviceListLifetime
        }
    }

    /// What to do with a direct message once its receiver's devices are known (or could not be).
    public enum Seal: Sendable, Equatable {
        /// `KeyWait`'s decision.
        case keyWait(KeyWait.Decision)
        /// Send it as typed, unencrypted and marked: the receiver has no keys and the user
        /// allowed it (`Settings.allowUnencrypted`).
        case unencrypted
    }

    public let settings: Settings
    /// How a message waits for keys.
    public var keyWait = KeyWait()
    /// When each receiver's device list was last fetched with bundles in it.
    public private(set) var fetchedAt: [String: NIODeadline] = [:]
    /// Receivers the relay said do not exist.
    public private(set) var unknownUsers: Set<String> = []
    /// Whether the relay keeps key bundles (false once it refused a publish as a bad request).
    public private(set) var relaySupportsKeys = true
    /// When a new session was last started with each peer device ("user/device") to ask for
    /// a message again.
    public private(set) var recoveryStarts: [String: NIODeadline] = [:]

    public init(settings: Settings = Settings()) {
        self.settings = settings
    }

    // MARK: Device lists

    /// Whether `peer`'s device list must be fetched before a message to it is sealed at `now`.
    public func needsDevices(of peer: String, now: NIODeadline) -> Bool {
        fetchedAt[peer].map { now - $0 >= settings.deviceListLifetime } ?? true
    }

    /// Whether the device list known here (`knownDevices` long) is replaced by a fetch's
    /// answer of `bundles` valid bundles: an empty answer for a peer with known devices means
    /// the relay lost its bundles (it asks the peer to publish again), so the known devices are
    /// kept.
    public func replacesDevices(bundles: Int, knownDevices: Int) -> Bool {
        bundles > 0 || knownDevices == 0
    }

    /// The relay answered a fetch of `peer`'s devices with `bundles` valid bundles, and the
    /// answer was taken at `now`. An empty answer is asked for again with the next message.
    public mutating func devicesAnswered(of peer: String, bundles: Int, now: NIODeadline) {
        unknownUsers.remove(peer)
        fetchedAt[peer] = bundles == 0 ? nil : now
    }

    /// The relay said `peer` does not exist.
    public mutating func noSuchUser(_ peer: String) {
        unknownUsers.insert(peer)
    }

    /// `peer`'s devices changed (the relay told of a new bundle): the next message fetches them.
    public mutating func devicesChanged(of peer: String) {
        fetchedAt[peer] = nil
    }

    /// The relay refused this device's bundle as a bad request: it keeps none.
    public mutating func relayKeepsNoKeys() {
        relaySupportsKeys = false
    }

    // MARK: Sealing

    /// What to do with a message to `peer` after `fetch` (nil: the device list was fresh, no
    /// fetch was made), knowing `knownDevices` of `peer`'s devices, at `now`.
    public func seal(to peer: String, after fetch: KeyWait.Fetch?, knownDevices: Int, connected: Bool, now: NIODeadline) -> Seal {
        let fetch: KeyWait.Fetch =
            fetch == .unavailable ? .unavailable : unknownUsers.contains(peer) ? .noSuchUser : fetch ?? .devices(count: knownDevices)
        let decision = keyWait.decide(after: fetch, knownDevices: knownDevices, connected: connected, now: now)
        if case .waitForFirstKeys = decision, settings.allowUnencrypted { return .unencrypted }
        return .keyWait(decision)
    }

    /// Whether a message whose sealing failed goes unencrypted instead: only when the user
    /// allowed it, and the relay keeps no keys or the encryption itself failed
    /// (`encryptionFailed`); anything else (the relay unreachable) fails or waits.
    public func sendsUnencrypted(encryptionFailed: Bool) -> Bool {
        settings.allowUnencrypted && (!relaySupportsKeys || encryptionFailed)
    }

    /// Whether a room post goes unencrypted to every member: only when the user allowed it and
    /// `keylessMembers` members have no usable keys. Otherwise it is sealed for the members
    /// that have keys, and the user is told who cannot read it.
    public func postsUnencrypted(keylessMembers: Int) -> Bool {
        settings.allowUnencrypted && keylessMembers > 0
    }

    // MARK: Recovery

    /// A message from `peer`'s `device` could not be decrypted at `now`: whether to ask for it
    /// on a new session (else on the current one). A session restored from a copy always
    /// gets a new one (it must not send, docs/E2E.md §7.3); otherwise at most one per
    /// `Settings.newSessionInterval`.
    public mutating func startsRecoverySession(with peer: String, device: String, sessionIsCopy: Bool, now: NIODeadline) -> Bool {
        let name = peer + "/" + device
        let starts = sessionIsCopy || recoveryStarts[name].map { now - $0 >= settings.newSessionInterval } ?? true
        if starts { recoveryStarts[name] = now }
        return starts
    }
}
