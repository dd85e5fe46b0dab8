import NIOCore

/// End-to-end key bundles (docs/PROTOCOL.md §4.8): the relay keeps each device's published
/// bundle and one-time prekeys in the store and hands them to senders, one one-time prekey per
/// device and fetch. It never reads a bundle's contents; it only checks sizes.
extension RelayCore {
    /// The sizes of a version 1 bundle as KEYS_PUBLISH carries it, without one-time prekeys
    /// (docs/E2E.md §3.1): version, identity, signed prekey and a zero count (167 bytes), and
    /// as much again plus a KEM prekey (id, ML-KEM-768 public key, signature: 1,252 bytes).
    public static let publishedKeyBundleSizes: Set<Int> = [167, 167 + 1252]
    /// Where a version 1 bundle's one-time prekey count (`u16`) starts.
    static let keyBundleCountOffset = 165

    /// Whether `bundle` is laid out as a version 1 bundle without one-time prekeys: the relay
    /// reads no keys, but a bundle no client could decode is refused when published rather than
    /// handed to senders, which would leave the device out.
    public static func isPublishableKeyBundle(_ bundle: [UInt8]) -> Bool {
        publishedKeyBundleSizes.contains(bundle.count) && bundle[0] == 1
            && bundle[keyBundleCountOffset] == 0 && bundle[keyBundleCountOffset + 1] == 0
    }
    /// The size of one published one-time prekey: id (u32) ‖ X25519 public key (32).
    public static let oneTimePrekeySize = 36
    /// One-time prekeys one KEYS_PUBLISH may add.
    public static let maxOneTimePrekeysPerPublish = 100

    /// A KEYS_PUBLISH from `user`'s session on `connection`: the bundle is kept for the
    /// session's device.
    func publishKeys(_ message: SIMPMessage, from user: String, on connection: ConnectionID, into output: inout [RelayAction]) {
        guard message.keyBundles.count == 1, let bundle = message.keyBundles.first, Self.isPublishableKeyBundle(bundle),
            message.oneTimePrekeys.count <= Self.maxOneTimePrekeysPerPublish,
            message.oneTimePrekeys.allSatisfy({ $0.count == Self.oneTimePrekeySize }),
            let session = connections.session(on: connection), let registration = sessions.registration(ofSession: session)
        else {
            return refuseKeys(
                message, from: user, on: connection,
                "KEYS_PUBLISH needs one version 1 key bundle without one-time prekeys (docs/E2E.md §3.1: 167 bytes, "
                    + "1,419 with a KEM prekey, count 0) and at most "
                    + "\(Self.maxOneTimePrekeysPerPublish) one-time prekeys of \(Self.oneTimePrekeySize) bytes", into: &output)
        }
        if let problem = Self.keyBundleProblem(bundle, oneTimePrekeys: message.oneTimePrekeys) {
            return refuseBundle(message, from: user, device: registration.device, on: connection, problem, section: "3.3", into: &output)
        }
        if let problem = Self.deviceListProblem(message.deviceList, of: user) {
            return refuseBundle(message, from: user, device: registration.device, on: connection, problem, section: "3.4", into: &output)
        }
        var request = KeysPublish(
            user: user, device: registration.device, bundle: bundle, oneTimePrekeys: message.oneTimePrekeys, connection: connection,
            messageId: message.messageId)
        request.deviceList = message.deviceList
        output.append(.store(.publishKeys(request)))
    }

    /// A KEYS_FETCH from `user`: the bundles of `toUser`'s devices.
    func fetchKeys(_ message: SIMPMessage, from user: String, on connection: ConnectionID, into output: inout [RelayAction]) {
        guard !message.toUser.isEmpty, !Self.isRoomAddress(message.toUser), message.members.count <= Self.maxWhoUsers else {
            return refuseKeys(message, from: user, on: connection, "KEYS_FETCH needs toUser (a user, not a room)", into: &output)
        }
        var fetch = KeysFetch(user: message.toUser, skipClaimFor: message.members, connection: connection, messageId: message.messageId, asker: user)
        fetch.knownTreeSize = message.directoryProof.knownTreeSize
        fetch.peerTreeSize = message.directoryProof.peerTreeSize
        output.append(.store(.fetchKeys(fetch)))
    }

    /// The store answered a `.publishKeys`.
    func keysPublished(_ request: KeysPublish, _ result: Result<Int, StoreFailure>, into output: inout [RelayAction]) {
        guard case .success(let left) = result else {
            return output.append(.send(request.connection, .error(.internal, "key bundle not stored, try again", messageId: request.messageId)))
        }
        var reply = SIMPMessage(kind: .keysPublish, messageId: request.messageId, toUser: request.user)
        reply.prekeysLeft = UInt32(clamping: left)
        output.append(.send(request.connection, reply))
    }

    /// The store answered a `.fetchKeys`.
    func keysFetched(
        _ request: KeysFetch, _ result: Result<([DeviceKeys], Bool), StoreFailure>, deviceList: [UInt8] = [], log: KeyLogSnapshot? = nil,
        into output: inout [RelayAction]
    ) {
        guard case .success(let (devices, known)) = result else {
            return output.append(.send(request.connection, .error(.internal, "key bundles unavailable, try again", messageId: request.messageId)))
        }
        guard known else {
            return output.append(.send(request.connection, .error(.unknownRecipient, "no such user: \(request.user)", messageId: request.messageId)))
        }
        var reply = SIMPMessage(kind: .keysFetch, messageId: request.messageId, toUser: request.user)
        let (fitting, leftOut) = Self.fittingKeysAnswer(devices, deviceList: deviceList)
        reply.deviceList = deviceList
        reply.directoryProof = Self.directoryProof(
            for: deviceList, in: log, knownTreeSize: request.knownTreeSize, peerTreeSize: request.peerTreeSize)
        reply.devicesLeftOut = UInt32(clamping: leftOut)
        reply.members = fitting.map(\.device)
        reply.keyBundles = fitting.map(\.bundle)
        reply.oneTimePrekeys = fitting.map { $0.oneTimePrekey ?? [] }
        output.append(.send(request.connection, reply))
    }

    private func refuseKeys(
        _ message: SIMPMessage, from user: String, on connection: ConnectionID, _ text: String, into output: inout [RelayAction]
    ) {
        output += [
            .reject(.missingField, detail: "\(message.kind) from \(user): \(text)"),
            .send(connection, .error(.badRequest, text, messageId: message.messageId)),
        ]
    }
}

/// A device's key bundle to keep (`StoreRequest.publishKeys`): the bundle replaces the device's
/// earlier one; the one-time prekeys join those not handed out yet. Answered `.keysPublished`.
public struct KeysPublish: Sendable, Equatable {
    public var user: String
    public var device: String
    /// The bundle without one-time prekeys, opaque to the relay.
    public var bundle: [UInt8]
    /// One-time prekeys, 36 bytes each.
    public var oneTimePrekeys: [[UInt8]]
    public var connection: ConnectionID
    public var messageId: UInt64
    /// The user's signed device list (docs/E2E.md §3.4), kept in place of the user's earlier
    /// one; empty: the kept one stays.
    public var deviceList: [UInt8] = []

    /// How a published bundle compares with what the store held for the device.
    public enum Change: Sendable, Equatable {
        /// The same bundle again (a device publishes at every login).
        case unchanged
        /// The device had another bundle (new keys: reinstalled, state lost, prekeys rotated).
        case changed
        /// The device had none: it is new to the user.
        case newDevice
    }

    public init(user: String, device: String, bundle: [UInt8], oneTimePrekeys: [[UInt8]], connection: ConnectionID, messageId: UInt64) {
        self.user = user
        self.device = device
        self.bundle = bundle
        self.oneTimePrekeys = oneTimePrekeys
        self.connection = connection
        self.messageId = messageId
    }
}

/// A fetch of `user`'s key bundles (`StoreRequest.fetchKeys`): every device's bundle, and for
/// each device not in `skipClaimFor` one one-time prekey, removed from the store as it is
/// handed out (atomically: no two fetches get the same one). Answered `.keys`.
public struct KeysFetch: Sendable, Equatable {
    public var user: String
    /// Devices the asker already has a session with: no one-time prekey is claimed for them.
    public var skipClaimFor: [String]
    public var connection: ConnectionID
    public var messageId: UInt64
    /// Who asks: recorded as a watcher of `user`'s bundles for `RelayCore.keyWatchPeriod`.
    public var asker: String
    /// The size of the largest key directory head the asker verified (docs/E2E.md §18.4).
    public var knownTreeSize: UInt64 = 0
    /// The size of a head a peer gossiped, to prove the head against (0: none).
    public var peerTreeSize: UInt64 = 0

    public init(user: String, skipClaimFor: [String], connection: ConnectionID, messageId: UInt64, asker: String = "") {
        self.user = user
        self.asker = asker
        self.skipClaimFor = skipClaimFor
        self.connection = connection
        self.messageId = messageId
    }
}

/// One device's keys as the store hands them out.
public struct DeviceKeys: Sendable, Equatable {
    public var device: String
    public var bundle: [UInt8]
    /// The claimed one-time prekey; nil when none is left or none was asked for.
    public var oneTimePrekey: [UInt8]?
    /// How many one-time prekeys the device has left after the claim (nil: none was claimed).
    public var prekeysLeft: Int?

    public init(device: String, bundle: [UInt8], oneTimePrekey: [UInt8]?, prekeysLeft: Int? = nil) {
        self.device = device
        self.bundle = bundle
        self.oneTimePrekey = oneTimePrekey
        self.prekeysLeft = prekeysLeft
    }
}
