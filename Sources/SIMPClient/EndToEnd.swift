import Foundation
import Logging
import NIOCore
import SIMPCore
import SIMPE2E

/// End-to-end encryption settings of a client (docs/PROTOCOL.md §4.8, docs/E2E.md §11).
public struct EndToEndSettings: Sendable {
    /// `$SIMP_HOME`: the device's keys and sessions live under `<home>/e2e/<user>/<device>/`.
    public var home: URL
    /// Send unencrypted to a peer that has published no key bundle, or through a relay that
    /// keeps none (`--no-e2e`), instead of refusing; such messages are marked.
    public var allowUnencrypted = false
    /// How many one-time prekeys the relay should hold for this device; topped up at login
    /// when fewer than half are left.
    public var oneTimePrekeys = 20
    /// How long a peer's fetched device list is used before it is fetched again.
    public var deviceListLifetime: TimeAmount = .minutes(5)
    /// Use this device's keys as they are (`simp keys`): never make keys (a device without any
    /// fails to open: `SIMPClientError.notEncryptable`), never publish a bundle.
    public var existingKeysOnly = false
    /// Make this user's signing key when this device is the user's first (no other device and no
    /// device list at the relay), and sign the list of approved devices with it (docs/E2E.md
    /// §3.4). Peers then encrypt only to the devices a device holding the key approved. The
    /// `simp` command sets it; without it a user stays with devices trusted one by one.
    public var makesUserKey = false

    public init(home: URL, allowUnencrypted: Bool = false) {
        self.home = home
        self.allowUnencrypted = allowUnencrypted
    }
}

/// What the user is told about end-to-end encryption: a peer's new or changed device, or a
/// message that could not be decrypted.
public enum EndToEndNotice: Equatable, Sendable, CustomStringConvertible {
    case peer(E2ENotice)
    /// Message `messageId` from `user` could not be decrypted on this device.
    case undecryptable(user: String, messageId: UInt64, reason: String)
    /// This user's account logged in from a new device (from `loginAddress`, when known).
    case ownNewDevice(device: String, loginAddress: String)
    /// `user` was marked verified, and one of its devices is new or has another key since.
    case verifiedKeyChanged(user: String)
    /// Message `messageId` from `user`'s `device` could not be decrypted (that device was
    /// restored from a backup, or this one was): it was asked, on a new session, to send it again.
    case askedAgain(user: String, device: String, messageId: UInt64)
    /// `user`'s `device` could not decrypt message `messageId` from this device and asked for
    /// it again: it was sent again on a new session (`again`), or it is no longer kept here.
    case resent(user: String, device: String, messageId: UInt64, again: Bool)
    /// A message to `user` waits in the outbox: `user` has published no end-to-end keys yet (it
    /// never logged in). It is sent, end to end, when `user` has keys.
    case waitingForFirstLogin(user: String)
    /// This device's session with `user`'s `device` was restored from a copy of its state (a
    /// backup): a new one was started before sending, and the peer is told so.
    case restoredSessionReplaced(user: String, device: String)
    /// This device's end-to-end state cannot be written (`reason`, such as a full disk): the
    /// messages received since are not receipted (their senders or the relay keep them) and
    /// those sent wait, until it can (`stateWritableAgain`).
    case stateUnwritable(reason: String)
    /// This device's end-to-end state can be written again after `stateUnwritable`.
    case stateWritableAgain
    /// The identity key of `user`'s `device` changed: the safety number with it is `number` now
    /// (said once per change; `user`'s next message is marked).
    case safetyNumberChanged(user: String, device: String, number: String)
    /// `user`'s `device` published keys no one can use (`reason`): nothing is encrypted to it
    /// (said once per process); other devices and members are not held up by it.
    case unusableKeys(user: String, device: String, reason: String)
    /// Member `user` of `room` has no end-to-end keys this device can use (none published, or
    /// each unusable): the posts are encrypted for the other members, and `user` cannot read them.
    case noUsableKeys(user: String, room: String)
    /// `user`'s `device` asked for message `messageId` again, but had no copy of it when it was
    /// sent (a device added since, or with another key): nothing was sent to it.
    case resendRefused(user: String, device: String, messageId: UInt64)
    /// `user` joined `room` by name (the relay lists it) and no member admitted it: it gets no
    /// sender key from this device, so it cannot read the posts, until a member admits it.
    case roomJoinNotAdmitted(user: String, room: String)
    /// `user` was admitted to `room` by `by` (this user, or a member whose admit arrived end to
    /// end): it gets this device's next sender key and reads the posts from then on.
    case roomAdmitted(user: String, room: String, by: String)
    /// `user` has a user key this device pinned, and `user`'s `device` is not in the device list
    /// it signed: nothing is encrypted to that device (said once per device and process).
    case unapprovedDevice(user: String, device: String)
    /// A device list signed by another user key than the one pinned for `user` (every device
    /// of `user` was replaced, or someone published keys as `user`): the new key is pinned, and
    /// a verified `user` is blocked until the user accepts (docs/E2E.md §3.4, §10).
    case userKeyChanged(user: String)
    /// The relay served no device list for `user`, or one that is not valid (`reason`), though a
    /// user key is pinned: only the devices the pinned list approves get messages.
    case deviceListWithdrawn(user: String, reason: String)
    /// This user's `device` is not in the user's signed device list: peers who know the user key
    /// send it nothing until a device holding the key approves it (`simp devices approve`).
    case ownDeviceNotApproved(device: String, code: String?)
    /// A checkpoint of the key directory `user` sent end to end is not on the log the relay
    /// shows this device (same size, another root; or no proof joins them): the relay shows
    /// the two users different key directories (docs/E2E.md §18.5).
    case keyDirectoryForked(user: String)
    /// The relay's key directory proof for `user`'s device list does not check out (`reason`):
    /// the list was not taken (docs/E2E.md §18.4).
    case keyDirectoryRefused(user: String, reason: String)

    public var description: String {
        switch self {
        case .peer(.newDevice(let user, let device)): "\(user) has a new device: \(device)"
        case .peer(.deviceKeyChanged(let user, let device)): "\(user)'s device \(device) has a new key: verify it again (/verify \(user))"
        case .peer(.sessionRestarted(let user, let device)): "\(user)'s device \(device) started a new session (its state was lost or restored)"
        case .undecryptable(let user, let id, let reason): "message \(id) from \(user) could not be decrypted: \(reason)"
        case .ownNewDevice(let device, let address): "a new device \"\(device)\" logged in as you" + (address.isEmpty ? "" : " from \(address)")
        case .verifiedKeyChanged(let user): "\(user) is no longer verified: a key changed (/verify \(user), then /verify \(user) --confirm)"
        case .askedAgain(let user, let device, let id):
            "message \(id) from \(user) (\(device)) could not be decrypted; asked for it again on a new session"
        case .resent(let user, let device, let id, true):
            "\(user)'s device \(device) could not read your message \(id); it was sent again on a new session"
        case .waitingForFirstLogin(let user):
            "waiting for \(user)'s first login: \(user) has no end-to-end keys yet; the message stays in the outbox and is sent, end to end, then"
        case .restoredSessionReplaced(let user, let device):
            "this device's session with \(user) (\(device)) was restored from a backup; a new one was started"
        case .stateUnwritable(let reason):
            "cannot write this device's end-to-end state (\(reason)): messages received are not confirmed to their senders, and messages sent wait, until it can be written; nothing is lost"
        case .stateWritableAgain: "this device's end-to-end state can be written again: waiting messages go on"
        case .resent(let user, let device, let id, false):
            "\(user)'s device \(device) could not read your message \(id), and it is no longer kept here to send again"
        case .safetyNumberChanged(let user, let device, let number):
            "safety number changed: \(user)'s device \(device) has a new identity key; the safety number is now \(number) (compare with simp keys --with \(user))"
        case .resendRefused(let user, let device, let id):
            "\(user)'s device \(device) asked for your message \(id) again, but it was not sent to that device: refused (a new device gets no earlier messages)"
        case .noUsableKeys(let user, let room):
            "\(user) in #\(room) has no usable end-to-end keys: posts to #\(room) are encrypted for the other members, and \(user) cannot read them"
        case .unapprovedDevice(let user, let device):
            "\(user) has a device that \(user)'s other devices have not approved (\(device)): not sending to it"
        case .userKeyChanged(let user):
            "safety number changed: \(user)'s user key changed (all of \(user)'s devices were replaced, or someone published keys as "
                + "\(user)); compare the safety numbers (simp keys --with \(user))"
        case .deviceListWithdrawn(let user, let reason):
            "the relay serves no valid device list for \(user) (\(reason)): only the devices \(user) approved before get messages"
        case .ownDeviceNotApproved(let device, nil):
            "your device \(device) is not approved by your other devices: peers send it nothing; if it is yours, run "
                + "`simp devices approve \(device)` on the device that holds your user key"
        case .ownDeviceNotApproved(let device, let code?):
            "this device (\(device)) is not approved by your other devices: peers send it nothing; its device code is \(code): "
                + "run `simp devices approve \(device)` on the device that holds your user key and check that it shows the same code"
        case .unusableKeys(let user, let device, let reason):
            "\(user)'s device \(device) published unusable end-to-end keys (\(reason)): nothing is encrypted to that device"
        case .roomJoinNotAdmitted(let user, let room):
            "\(user) joined #\(room) by name and cannot read it: no member admitted \(user) (simp chat: /admit \(user) #\(room))"
        case .roomAdmitted(let user, let room, let by):
            "\(user) was admitted to #\(room) by \(by) and reads its posts from the next one"
        case .keyDirectoryForked(let user):
            "WARNING: the relay is showing different key directories to you and \(user): it may be giving one of you keys that are "
                + "not the other's; compare safety numbers with \(user) in person (simp keys --with \(user))"
        case .keyDirectoryRefused(let user, let reason):
            "WARNING: the relay's key directory does not prove \(user)'s device list (\(reason)): the list was not taken"
        }
    }
}

/// The client's end-to-end shell (docs/PROTOCOL.md §4.8): the keys live in `E2EMessenger` (sans-I/O);
/// this fetches and publishes bundles over the control connection and keeps the messenger's
/// state in `$SIMP_HOME`. Confined to the engine's event loop.
final class EndToEnd: @unchecked Sendable {
    let settings: EndToEndSettings
    let user: String
    var messenger: E2EMessenger
    /// The sender's decisions and what they remember (device lists' age, users the relay said
    /// do not exist, whether the relay keeps keys, recovery sessions started): sans-I/O.
    var policy: EndToEndPolicy
    /// When each peer's device list was last fetched (`policy`'s).
    var fetchedAt: [String: NIODeadline] { policy.fetchedAt }
    /// The random bits for keys and nonces (the engine's `Environment.entropy`).
    var random: EntropyGenerator
    /// Milliseconds since the Unix epoch (the engine's `Environment.wallClockMillis`): when a
    /// message was opened, for the ratchet's skipped keys and held posts.
    let wallClockMillis: () -> Int64
    let logger: Logger
    /// Room posts waiting for their author's sender key, and the rooms' members (EndToEnd+Rooms).
    var rooms = RoomPosts()
    /// Whether the relay keeps key bundles (false after it refused KEYS_PUBLISH).
    var relaySupportsKeys: Bool { policy.relaySupportsKeys }
    /// Peers marked verified (`markVerified`).
    let verifiedPeers = VerifiedPeers()
    var onNotice: (EndToEndNotice) -> Void = { _ in }
    /// Direct messages sealed lately, to send again when a peer device asks (EndToEnd+Resend).
    var sentLog = SentLog()
    /// The last request to each peer device ("user/device") to send a message again, which
    /// the next one waits for.
    var resendAsks: [String: EventLoopFuture<Void>] = [:]
    /// Whether this device's bundle was published once in this process (then every later login
    /// publishes it again: `loggedInAgain`), and whether a publish is under way now.
    var hasPublished = false
    var publishing = false
    /// Whether the store could be written at the last commit (EndToEnd+Durability).
    var durability = DurabilityGate()
    /// What the user was told once in this process (unusable keys, unapproved devices, device
    /// lists and key directory problems, lapsed verifications).
    var toldOnce = ToldOnce()
    /// What this device verified of the relay's key directory log (EndToEnd+KeyDirectory;
    /// loaded from the store at first use).
    var keyDirectoryCache: KeyDirectoryView?
    /// Forks of the key directory seen in this process (each told as `keyDirectoryForked`).
    var keyDirectoryForks = 0

    /// Where this device's keys, sessions and what it knows of its peers are kept; the held
    /// room posts are kept there too.
    let store: E2EStateStore

    /// Opens `device`'s state in `store`, by default files under `settings.home`, with the
    /// engine's randomness and wall clock.
    init(
        settings: EndToEndSettings, user: String, device: String, store: E2EStateStore? = nil, logger: Logger,
        entropy: Entropy = .system, wallClockMillis: @escaping () -> Int64 = WallClock.millisecondsSinceEpoch
    ) throws {
        self.settings = settings
        self.user = user
        self.logger = logger
        policy = EndToEndPolicy(
            settings: .init(allowUnencrypted: settings.allowUnencrypted, deviceListLifetime: settings.deviceListLifetime))
        let fileStore = store == nil ? EndToEndFileStore(home: settings.home, user: user, device: device) : nil
        let store = store ?? fileStore!
        self.store = store
        if settings.existingKeysOnly, try store.load("identity") == nil {
            throw SIMPClientError.notEncryptable(
                "device \"\(device)\" of \(user) has no end-to-end keys yet (its first simp chat, listen or send makes them)")
        }
        var random = EntropyGenerator(entropy: entropy)
        messenger = try E2EMessenger(device: device, store: store, using: &random)
        self.random = random
        self.wallClockMillis = wallClockMillis
        // From now on a message's ratchet step, its plaintext and what else it changed are
        // written together, before its receipt leaves (docs/E2E.md §15).
        fileStore?.groupsCommits = true
    }

    /// This device's name.
    var device: String { messenger.device }

    /// The list of `peer`'s devices is stale (the relay told of a new bundle): the next message
    /// to `peer` fetches it again.
    func forgetDevices(of peer: String) { policy.devicesChanged(of: peer) }

    /// This device's identity, for safety numbers.
    var identity: IdentityKey { messenger.local.identity.publicKey }

    /// `message` with its content sealed for every device of its receiver (fetching their
    /// bundles first when the list is old); unchanged for a room, a message sealed before, or
    /// (with `allowUnencrypted`) a receiver that cannot decrypt. What `KeyWait` decides after
    /// the fetch is carried out: a message that cannot be sealed yet fails with
    /// `DevicesNotYetKnown` (the relay cannot be asked now) or `AwaitingFirstKeys` (the receiver
    /// has published no keys yet), and the engine holds it (`HeldForKeys`).
    func seal(_ message: SIMPMessage, via engine: ClientEngine) -> EventLoopFuture<SIMPMessage> {
        let peer = message.toUser
        guard message.e2ePayload.isEmpty else { return engine.eventLoop.makeSucceededFuture(message) }
        if RelayCore.isRoomAddress(peer) { return sealPost(message, via: engine) }
        let fetches = policy.needsDevices(of: peer, now: engine.now)
        let devices = fetches ? fetchDevices(of: peer, via: engine) : engine.eventLoop.makeSucceededVoidFuture()
        return devices.flatMapThrowing { [self] () -> KeyWait.Fetch? in
            fetches ? .devices(count: try messenger.devices(of: peer).count) : nil
        }.flatMapErrorThrowing { error -> KeyWait.Fetch? in
            guard let fetch = KeyWait.fetch(after: Self.keyFetchFailure(error)) else { throw error }
            return fetch
        }.flatMapThrowing { [self] fetch in
            let known = try messenger.devices(of: peer).count
            return policy.seal(to: peer, after: fetch, knownDevices: known, connected: engine.control != nil, now: engine.now)
        }.flatMap { [self] decision -> EventLoopFuture<SIMPMessage> in
            switch decision {
            case .unencrypted:
                return engine.eventLoop.makeSucceededFuture(message) // the user's own choice (--no-e2e)
            case .keyWait(.seal):
                do { try refuseUnlessVerificationHolds(peer, what: "not sent to \(peer)") } catch { return engine.eventLoop.makeFailedFuture(error) }
                tellUnapproved(of: peer)
                return restartCopiedSessions(with: peer, via: engine).flatMapThrowing { [self] in
                    message.sealedEndToEnd(try messenger.seal(withDirectoryCheckpoint(message).endToEndPlaintext, to: peer))
                }
            case .keyWait(.sealForNobody):
                let empty = E2EEnvelope(senderDevice: messenger.device, copies: []).encoded
                return engine.eventLoop.makeSucceededFuture(message.sealedEndToEnd(empty))
            case .keyWait(.holdForRelay(let retry)):
                return engine.eventLoop.makeFailedFuture(DevicesNotYetKnown(retry: retry))
            case .keyWait(.waitForFirstKeys(let recheck)):
                return engine.eventLoop.makeFailedFuture(AwaitingFirstKeys(recheck: recheck))
            }
        }.flatMapErrorThrowing { [self] error in
            guard policy.sendsUnencrypted(encryptionFailed: error is E2EError) else { throw error }
            return message
        }
    }

    /// How a sender waits for keys: the decisions of `seal` and of held messages.
    var keyWait: KeyWait { policy.keyWait }

    /// Whether a KEYS_FETCH failed only for now, as `KeyWait.fetch(after:)` decides: asked
    /// again later instead of failing the message.
    static func isUnavailable(_ error: Error) -> Bool {
        KeyWait.fetch(after: keyFetchFailure(error)) == .unavailable
    }

    /// `error` (a KEYS_FETCH's) as the core's `KeyWait.Failure`.
    static func keyFetchFailure(_ error: Error) -> KeyWait.Failure {
        switch error as? SIMPClientError {
        case .connectionLost?: .connectionLost
        case .timedOut?: .timedOut
        case .rejected(let code, _)?: .refused(code)
        default: .other
        }
    }

    /// `message` with its content decrypted; nil for a copy decrypted before, for a resend
    /// request (answered), and for one that cannot be decrypted: the user is told that instead
    /// (never an empty line), and the sending device is asked for it again when that can help
    /// (through `engine`; without one, as in a unit test, it is not asked).
    func open(_ message: SIMPMessage, via engine: ClientEngine? = nil) -> SIMPMessage? {
        guard message.isEndToEnd else { return message }
        defer { // room posts given up while opening this one: their authors are told (after it is handed over)
            if let engine, !rooms.waiting.unread.isEmpty { engine.eventLoop.execute { self.tellAuthorsOfUnreadPosts(via: engine) } }
        }
        if RelayCore.isRoomAddress(message.fromUser) {
            if let engine { watchMembers(after: message, via: engine) }
            return openPost(message)
        }
        let envelope = try? E2EEnvelope(encoded: message.e2ePayload)
        let sender = envelope?.senderDevice ?? ""
        do {
            let now = UInt64(wallClockMillis())
            let opened = try messenger.receive(message.e2ePayload, messageId: message.messageId, from: message.fromUser, now: now, using: &random)
            if opened.openedBefore {
                // A copy delivered again (this device restarted before its receipt left): handed
                // over as it was opened then; the application says whether it has it. A resend
                // request or a sender key did its work then.
                let isMessage =
                    !ResendRequest.isResendRequest(opened.plaintext) && !E2EMessenger.isSenderKeyDistribution(opened.plaintext)
                    && !RoomAdmit.isAdmit(opened.plaintext)
                return isMessage ? try message.openedEndToEnd(opened.plaintext) : nil
            }
            if ResendRequest.isResendRequest(opened.plaintext) {
                // Its new session is not news: the line about the message sent again says it.
                for notice in opened.notices where notice != .sessionRestarted(user: message.fromUser, device: sender) { tell(notice) }
                // Sent after the session handed this message over (not while it does).
                if let engine { engine.eventLoop.execute { self.resend(asked: opened.plaintext, by: message.fromUser, device: sender, via: engine) } }
                return nil
            }
            for notice in opened.notices { tell(notice) }
            checkVerification(of: message.fromUser)
            if E2EMessenger.isSenderKeyDistribution(opened.plaintext) { return takeSenderKey(opened.plaintext, message) }
            if RoomAdmit.isAdmit(opened.plaintext) { return takeAdmit(opened.plaintext, from: message.fromUser) }
            let content = try message.openedEndToEnd(opened.plaintext)
            checkGossip(content.directoryProof.directoryCheckpoint, from: message.fromUser, via: engine)
            return content
        } catch E2EError.duplicate where (try? messenger.hasDecrypted(message.messageId, from: message.fromUser, device: sender)) != false {
            return nil // decrypted before this device restarted, delivered again (its receipt was lost)
        } catch  where engine != nil && E2EMessenger.isRecoverable(error) && envelope?.copies.contains(where: { $0.device == device }) == true {
            // A new message this device cannot decrypt: its key was used before (the sender was
            // restored from a backup) or the sessions no longer agree (this device was).
            logger.info( // the notice tells the user
                "cannot decrypt a message: asking for it again",
                metadata: ["from": "\(message.fromUser)/\(sender)", "id": "\(message.messageId)", "error": "\(error)"])
            engine!.eventLoop.execute { [engine] in self.askAgain(for: message, device: sender, via: engine!) }
            onNotice(.askedAgain(user: message.fromUser, device: sender, messageId: message.messageId))
            return nil
        } catch E2EError.duplicate {
            return nil
        } catch E2EError.noSession where toldOnce.wasTold(.ownDeviceNotApproved(device: device)) {
            // Senders who know this user's key leave out a device it did not approve.
            let reason = "it was not encrypted for this device, which your user key has not approved (simp devices approve \(device))"
            onNotice(.undecryptable(user: message.fromUser, messageId: message.messageId, reason: reason))
            return nil
        } catch {
            logger.warning("cannot decrypt a message", metadata: ["from": "\(message.fromUser)", "id": "\(message.messageId)", "error": "\(error)"])
            onNotice(.undecryptable(user: message.fromUser, messageId: message.messageId, reason: "\(error)"))
            return nil
        }
    }

    /// The safety numbers with each device of `peer` (fetching its devices first).
    func safetyNumbers(with peer: String, via engine: ClientEngine) -> EventLoopFuture<[(device: String, number: String)]> {
        fetchDevices(of: peer, via: engine).flatMapThrowing { [self] in
            try messenger.devices(of: peer).compactMap { device in
                try messenger.safetyNumber(localUser: user, peer: peer, device: device.device).map { (device.device, $0) }
            }
        }
    }

    /// Fetches `peer`'s bundles (claiming one-time prekeys only for devices without a session).
    func fetchDevices(of peer: String, via engine: ClientEngine) -> EventLoopFuture<Void> {
        let known: [String]
        do { known = try messenger.devices(of: peer).map(\.device) } catch { return engine.eventLoop.makeFailedFuture(error) }
        return fetchKeys(of: peer, members: known, via: engine).flatMapThrowing { [self] answer, proved in
            let bundles = verifiedBundles(in: answer, of: peer)
            if let proved { try takeDeviceList(proved.deviceList, of: peer) }
            defer { tellUnapproved(of: peer) }
            // None at all, for a peer this device has sessions with: the relay lost its bundles
            // (it asks the peer to publish again). The known devices are kept, and the list is
            // asked for again with the next message.
            guard policy.replacesDevices(bundles: bundles.count, knownDevices: try messenger.devices(of: peer).count) else {
                return policy.devicesAnswered(of: peer, bundles: 0, now: engine.now)
            }
            for notice in try messenger.updateDevices(of: peer, bundles: bundles, using: &random) {
                tell(notice)
                if case .deviceKeyChanged = notice { try renewRoomKeys(with: peer) }
            }
            checkVerification(of: peer)
            policy.devicesAnswered(of: peer, bundles: bundles.count, now: engine.now)
        }.flatMapErrorThrowing { [self] error in
            guard case SIMPClientError.rejected(.unknownRecipient, _) = error else { throw error }
            policy.noSuchUser(peer)
        }
    }

    /// The bundles of a KEYS_FETCH answer for `peer` whose signatures verify, by device, each
    /// with the one-time prekey the relay handed out for it (others are logged and left out).
    func verifiedBundles(in answer: SIMPMessage, of peer: String) -> [(device: String, bundle: KeyBundle)] {
        var bundles: [(device: String, bundle: KeyBundle)] = []
        if answer.devicesLeftOut > 0, toldOnce.shouldTell(.devicesLeftOut(user: peer)) {
            let reason = "the relay's answer had no room for their keys"
            onNotice(.unusableKeys(user: peer, device: "(\(answer.devicesLeftOut) more)", reason: reason))
        }
        for (index, device) in answer.members.enumerated() where index < answer.keyBundles.count {
            do {
                let prekey = answer.oneTimePrekeys.indices.contains(index) ? answer.oneTimePrekeys[index] : []
                let bundle = try KeyBundle.checked(answer.keyBundles[index])
                let handedOut = bundle.with(oneTimePrekey: prekey.isEmpty ? nil : try OneTimePrekey(encoded: prekey))
                try handedOut.checkKeys()
                bundles.append((device, handedOut))
            } catch {
                logger.warning("ignoring a key bundle", metadata: ["user": "\(peer)", "device": "\(device)", "error": "\(error)"])
                if toldOnce.shouldTell(.unusableKeys(user: peer, device: device)) {
                    onNotice(.unusableKeys(user: peer, device: device, reason: "\(error)"))
                }
            }
        }
        return bundles
    }
}
