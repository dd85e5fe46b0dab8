import NIOCore
import SIMPCore

/// The relay-core test helpers: a `RelayCore` with seeded entropy (so every output is
/// deterministic) and, for each connected user, what its client holds: its connection, its
/// datagram address and its session keys.
///
/// Every entry point returns the actions the core appended, so tests compare whole outputs
/// (`XCTAssertEqual(actions, [...])`, or any other framework's equality check: the kit does not
/// import XCTest, and what it checks itself it reports by throwing `UnexpectedActions`). Datagrams the relay seals for a user are either opened
/// with the user's keys (`open`, `delivered`) or expected whole (`delivery`): sealing is
/// deterministic, so the expected bytes are built with the user's keys, in the order the relay
/// seals them.
///
/// By default the relay is in development mode (CONNECT without login, the session secret in
/// CONNECTED); `configure` may switch login on.
///
/// Where `EmbeddedRelay` (SIMPTestKit) runs the relay's engine and handlers on channels, this
/// drives the sans-I/O `RelayCore` alone, one entry point at a time: for tests of the core's
/// decisions, and of code that reads or builds the relay's actions.
public struct DevRelay {
    /// The time every test starts at.
    public static let t0 = NIODeadline.uptimeNanoseconds(10_000_000_000)

    /// What a connected user's client holds.
    public struct Client {
        /// The user's control connection.
        public var connection: ConnectionID
        /// Where the user's datagrams come from (its registered route).
        public var address: SocketAddress
        /// The session keys CONNECTED carried.
        public var keys: SessionKeys
        /// The session secret CONNECTED carried.
        public var secret: [UInt8]
        /// Seals the client's datagrams.
        public var sealer: DatagramSealer
        /// Opens what the relay sealed for the client.
        public var opener: DatagramOpener
        /// Builds the relay's next datagrams for the client, to expect them whole.
        public var expected: DatagramSealer
    }

    /// The core under test; tests may call any of its entry points directly (or through `run`).
    public var core: RelayCore
    /// The users connected through `connect` (or `complete`), by name.
    public private(set) var clients: [String: Client] = [:]
    /// Whether `run` keeps the core's notes of who sent content to whom
    /// (`StoreRequest.noteContact`) in what it returns. Off by default: the first message of
    /// each pair adds one, which the data path's tests are not about; the tests of who shares
    /// a conversation turn it on.
    public var keepsContactNotes = false

    /// A development relay `relayId` announcing UDP port `udpPort`, its entropy seeded with
    /// `seed`, started at `now`; `configure` changes its configuration first.
    public init(
        relayId: String = "r1", udpPort: Int = 7000, seed: UInt64 = 1, now: NIODeadline = DevRelay.t0,
        configure: (inout RelayCore.Configuration) -> Void = { _ in }
    ) {
        var configuration = RelayCore.Configuration(relayId: relayId, udpPort: udpPort)
        configuration.requireLogin = false
        configure(&configuration)
        core = RelayCore(configuration: configuration, entropy: .seeded(seed), now: now)
    }

    // MARK: Driving the core

    /// Runs one core entry point and returns what it appended (without contact notes, unless
    /// `keepsContactNotes`).
    public mutating func run(_ body: (inout RelayCore, inout [RelayAction]) -> Void) -> [RelayAction] {
        var actions: [RelayAction] = []
        body(&core, &actions)
        if !keepsContactNotes { actions.removeAll(where: \.isContactNote) }
        return actions
    }

    /// The control connection `connection`'s peer (unless a test names another).
    public static func peer(of connection: ConnectionID) -> SocketAddress {
        try! SocketAddress(ipAddress: "127.0.0.1", port: 40_000 + Int(connection.rawValue))
    }

    /// The control connection `connection` opens, from `peer` (default: `peer(of:)`).
    public mutating func open(_ connection: ConnectionID, peer: SocketAddress? = nil, now: NIODeadline = t0) -> [RelayAction] {
        run { $0.connectionOpened(connection, peer: peer ?? Self.peer(of: connection), now: now, into: &$1) }
    }

    /// `message` arrives as a frame on control connection `connection`.
    public mutating func control(_ message: SIMPMessage, on connection: ConnectionID, peer: SocketAddress? = nil, now: NIODeadline = t0)
        -> [RelayAction]
    {
        run { $0.controlReceived(message, on: connection, peer: peer ?? Self.peer(of: connection), now: now, into: &$1) }
    }

    /// Control connection `connection` closed.
    public mutating func closed(_ connection: ConnectionID) -> [RelayAction] {
        run { $0.connectionClosed(connection, into: &$1) }
    }

    /// The store answers a request the core made.
    public mutating func answer(_ answer: StoreAnswer, now: NIODeadline = t0) -> [RelayAction] {
        run { $0.storeAnswered(answer, now: now, into: &$1) }
    }

    /// The store fails a request the core made.
    public mutating func fail(_ request: StoreRequest, _ failure: StoreFailure, now: NIODeadline = t0) -> [RelayAction] {
        run { $0.storeFailed(request, failure, now: now, into: &$1) }
    }

    /// The answer of a store that knows nothing more than that `request` (a write, or a
    /// registration) was done.
    public static func done(_ request: StoreRequest) -> StoreAnswer {
        guard case .register(_, let connection) = request else { return .written }
        return .register(connection: connection, knownDevices: 1, elsewhere: false)
    }

    /// The core's timer runs at `now`.
    public mutating func tick(now: NIODeadline) -> [RelayAction] {
        run { $0.tick(now: now, into: &$1) }
    }

    /// `bytes` arrive on the relay's UDP socket from `source`.
    public mutating func datagram(_ bytes: ByteBuffer, from source: SocketAddress, now: NIODeadline = t0) -> [RelayAction] {
        run { $0.datagramReceived(bytes, from: source, now: now, into: &$1) }
    }

    /// Another relay hands over `delivery` (through the store's channel).
    public mutating func relayDelivery(_ delivery: RelayDelivery, now: NIODeadline = t0) -> [RelayAction] {
        run { $0.relayDeliveryReceived(delivery.encoded(), now: now, into: &$1) }
    }

    // MARK: Users

    /// A CONNECT for `user` announcing UDP port `udpPort`, from a client that reads batch
    /// receipts (as every current one does) unless `acceptsBatchReceipts` is false.
    public static func connectMessage(_ user: String, udpPort: Int, acceptsBatchReceipts: Bool = true) -> SIMPMessage {
        var connect = SIMPMessage(kind: .connect, fromUser: user)
        connect.udpPort = UInt32(udpPort)
        connect.acceptsBatchReceipts = acceptsBatchReceipts
        return connect
    }

    /// The registration the relay writes for `user` connecting on `connection` from `peer`'s
    /// IP with UDP port `port`.
    public func registration(_ user: String, on connection: ConnectionID, port: Int, peer: SocketAddress? = nil) -> Registration {
        var address = peer ?? Self.peer(of: connection)
        address.port = port
        let relayId = core.configuration.relayId
        return Registration(user: user, route: Route(address: address, relayId: relayId), session: "\(relayId)/\(connection.rawValue)")
    }

    /// Opens `connection`, sends CONNECT for `user` with UDP port `port`, and completes the
    /// registration; keeps the session keys from CONNECTED as the client would. Returns the
    /// actions of the completion. Throws `UnexpectedActions` if the core does not ask the store
    /// to register `user` (or `complete` throws).
    @discardableResult
    public mutating func connect(
        _ user: String, on connection: ConnectionID, port: Int, peer: SocketAddress? = nil, now: NIODeadline = t0, acceptsBatchReceipts: Bool = true
    ) throws -> [RelayAction] {
        _ = open(connection, peer: peer, now: now)
        let registering = control(
            Self.connectMessage(user, udpPort: port, acceptsBatchReceipts: acceptsBatchReceipts), on: connection, peer: peer, now: now)
        let register = RelayAction.store(.register(registration(user, on: connection, port: port, peer: peer), connection: connection))
        guard registering.last == register else {
            throw UnexpectedActions(step: "CONNECT registers \(user)", expected: [register], actual: registering)
        }
        return try complete(user, on: connection, port: port, peer: peer, now: now)
    }

    /// The store wrote the registration of `user`'s CONNECT on `connection`; keeps the session
    /// keys from CONNECTED as the client would, says HELLO and answers the inbox read with
    /// nothing stored. Returns the actions of the completion. Throws `UnexpectedActions` if the
    /// core does not send CONNECTED first, or does not answer the HELLO by reading the inbox.
    @discardableResult
    public mutating func complete(
        _ user: String, on connection: ConnectionID, port: Int, peer: SocketAddress? = nil, now: NIODeadline = t0
    ) throws -> [RelayAction] {
        let register = StoreRequest.register(registration(user, on: connection, port: port, peer: peer), connection: connection)
        let actions = answer(Self.done(register), now: now)
        guard case .send(connection, let connected)? = actions.first, connected.kind == .connected else {
            throw UnexpectedActions(step: "the registration of \(user) is answered with CONNECTED", expected: nil, actual: actions)
        }
        let keys = SessionKeys(sessionId: connected.sessionId, secret: connected.sessionSecret)
        clients[user] = Client(
            connection: connection, address: register.registration!.route.address, keys: keys, secret: connected.sessionSecret,
            sealer: DatagramSealer(keys: keys, direction: .uplink), opener: DatagramOpener(keys: keys, direction: .downlink),
            expected: DatagramSealer(keys: keys, direction: .downlink))
        // The client says HELLO, as a real one does: the relay answers and reads its inbox now.
        let hello = send(SIMPMessage(kind: .hello, fromUser: user), now: now)
        let helloExpected: [RelayAction] = [
            .store(.loadInbox(user: user)),
            reply(SIMPMessage(kind: .hello, toUser: user), to: user, at: clients[user]!.address),
        ]
        guard hello == helloExpected else {
            throw UnexpectedActions(step: "HELLO starts \(user)'s inbox", expected: helloExpected, actual: hello)
        }
        // The store finds nothing stored (tests that store something answer the read again).
        let emptyInbox = answer(.loadInbox(user: user, [], wallNow: 0), now: now)
        guard emptyInbox.isEmpty else {
            throw UnexpectedActions(step: "an empty inbox of \(user) is read", expected: [], actual: emptyInbox)
        }
        return actions
    }

    /// The CONNECTED `user`'s client received (with the session keys it holds).
    public func connected(_ user: String) -> SIMPMessage {
        var connected = SIMPMessage(kind: .connected, toUser: user)
        connected.udpPort = UInt32(core.configuration.udpPort)
        connected.relayId = core.configuration.relayId
        connected.sessionId = clients[user]!.keys.sessionId
        connected.maxDatagramSize = UInt32(core.configuration.maxDatagramSize)
        connected.batchReceipts = true
        connected.messageRateLimit = UInt32(core.configuration.messageLimit.perSecond)
        connected.sessionSecret = clients[user]!.secret
        return connected
    }

    /// The registration of connected `user`'s session (its default device, receiving), as the
    /// relay wrote it: from the user's current address.
    public func registration(of user: String) -> Registration {
        let relayId = core.configuration.relayId
        return Registration(
            user: user, route: Route(address: clients[user]!.address, relayId: relayId), session: "\(relayId)/\(clients[user]!.connection.rawValue)")
    }

    /// What a development relay does once the store has `user`'s registration.
    public func registeredActions(_ user: String) -> [RelayAction] {
        [
            .send(clients[user]!.connection, connected(user)), .event(.userConnected(registration(of: user))),
            .store(.announceMove(UserMove(user: user, relayId: core.configuration.relayId))),
            .store(.recordPresence(user: user, online: true)),
        ]
    }

    /// `user`'s control connection.
    public func connection(of user: String) -> ConnectionID { clients[user]!.connection }

    // MARK: Datagrams

    /// `message` sealed by its `fromUser`'s client.
    public mutating func sealed(_ message: SIMPMessage) -> ByteBuffer {
        clients[message.fromUser]!.sealer.seal(message)
    }

    /// `message` as a datagram sealed by its `fromUser`'s client, from that client's address
    /// (or `source`).
    public mutating func send(_ message: SIMPMessage, from source: SocketAddress? = nil, now: NIODeadline = t0) -> [RelayAction] {
        let bytes = sealed(message)
        return datagram(bytes, from: source ?? clients[message.fromUser]!.address, now: now)
    }

    /// What `user`'s client reads from a datagram the relay sealed for it.
    public mutating func open(_ bytes: ByteBuffer, as user: String) throws -> SIMPMessage {
        try MessageCodec.decode(try clients[user]!.opener.open(bytes).payload)
    }

    /// The messages of the `.deliver` actions for `user` in `actions`, opened.
    public mutating func delivered(to user: String, in actions: [RelayAction]) throws -> [SIMPMessage] {
        var messages: [SIMPMessage] = []
        for case .deliver(let recipient, let bytes, _) in actions where recipient == user {
            messages.append(try open(bytes, as: user))
        }
        return messages
    }

    /// The relay's next datagram for `user`, carrying `message`, to the user's address.
    public mutating func delivery(_ message: SIMPMessage, to user: String) -> RelayAction {
        delivery(payload: MessageCodec.encode(message), to: user)
    }

    /// The relay's next datagram for `user`, carrying encoded `payload`.
    public mutating func delivery(payload: ByteBuffer, to user: String) -> RelayAction {
        .deliver(user: user, clients[user]!.expected.seal(payload: payload), to: clients[user]!.address)
    }

    /// The relay's next datagram for `user`, as a reply (HELLO) to `source`.
    public mutating func reply(_ message: SIMPMessage, to user: String, at source: SocketAddress) -> RelayAction {
        .reply(clients[user]!.expected.seal(message), to: source)
    }

    /// `message` sealed by its `fromUser`'s client and carried in a DATAGRAM frame on that
    /// client's control connection (docs/PROTOCOL.md §5.5).
    public mutating func carry(_ message: SIMPMessage, now: NIODeadline = t0) -> [RelayAction] {
        let bytes = sealed(message)
        return control(.carrying(bytes), on: clients[message.fromUser]!.connection, now: now)
    }

    /// The relay's next datagram for `user`, carrying `message`, in a DATAGRAM frame on the
    /// user's control connection.
    public mutating func carried(_ message: SIMPMessage, to user: String) -> RelayAction {
        .carry(clients[user]!.connection, clients[user]!.expected.seal(message))
    }

    /// `user` now sends from `address` (its route moved).
    public mutating func move(_ user: String, to address: SocketAddress) {
        clients[user]!.address = address
    }
}

/// What `DevRelay` throws when the core's actions at a step it takes for the caller (`connect`,
/// `complete`) are not what a working relay does: the test fails at the step, with both lists.
public struct UnexpectedActions: Error, CustomStringConvertible {
    /// The step, as "what should have happened".
    public let step: String
    /// The actions the step needed (nil: described by `step` only).
    public let expected: [RelayAction]?
    /// What the core appended.
    public let actual: [RelayAction]

    /// The step, what it needed and what the core did instead.
    public var description: String {
        let needed = expected.map { "expected \($0), " } ?? ""
        return "\(step): \(needed)got \(actual)"
    }
}

extension StoreRequest {
    /// The registration of a `.register` request (nil for every other request).
    public var registration: Registration? {
        if case .register(let registration, _) = self { return registration }
        return nil
    }
}

extension RelayAction {
    /// Whether this is the store's note that one user sent content to another.
    var isContactNote: Bool {
        if case .store(.noteContact) = self { return true }
        return false
    }
}
