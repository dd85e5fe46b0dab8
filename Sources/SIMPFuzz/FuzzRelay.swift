import NIOCore
import SIMPCore

/// A `RelayCore` with users in every state a datagram or control frame can meet, driven the
/// way the relay's engine drives it, for the fuzz targets.
///
/// A development-mode relay (no passwords; the session secret comes in CONNECTED), so the
/// datagram target can seal its inputs as an authenticated but hostile client would. Local
/// users `alice` and `bob` are connected (control connections 1 and 2), `carol` has a cached
/// route on another relay, `dave` has registered before but is offline. Connection 3 is open
/// and waiting to log in: the control target's stream arrives on it.
struct FuzzRelay {
    static let now = NIODeadline.uptimeNanoseconds(1_000_000_000)
    static let fuzzedConnection = ConnectionID(3)
    /// Where the fuzzed datagrams and control stream come from: alice's host, another port,
    /// so datagrams claiming to be alice's exercise NAT rebinding.
    static let peer = try! SocketAddress(ipAddress: "127.0.0.1", port: 40_000)

    /// Built once; each input gets a copy.
    static let standard = FuzzRelay()

    private(set) var core: RelayCore
    /// Seals datagrams as alice's client does.
    private(set) var aliceSealer: DatagramSealer!

    private init() {
        var configuration = RelayCore.Configuration(relayId: "fuzz", udpPort: 7601)
        configuration.requireLogin = false
        configuration.messageLimit = RateLimit(perSecond: 1e9, burst: Int.max / 2)
        core = RelayCore(configuration: configuration, entropy: .seeded(1), now: Self.now)
        var actions: [RelayAction] = []
        for (number, user) in [(UInt64(1), "alice"), (2, "bob")] {
            let connection = ConnectionID(number)
            core.connectionOpened(connection, peer: nil, now: Self.now, into: &actions)
            var connect = SIMPMessage(kind: .connect, fromUser: user)
            connect.udpPort = UInt32(5000 + number)
            core.controlReceived(
                connect, on: connection, peer: try! SocketAddress(ipAddress: "127.0.0.1", port: 30_000), now: Self.now, into: &actions)
            for case .store(.register(_, let connection)) in actions {
                core.storeAnswered(.register(connection: connection, knownDevices: 1, elsewhere: false), now: Self.now, into: &actions)
            }
            for case .send(_, let connected) in actions where user == "alice" && connected.kind == .connected {
                let keys = SessionKeys(sessionId: connected.sessionId, secret: connected.sessionSecret)
                aliceSealer = DatagramSealer(keys: keys, direction: .uplink)
            }
            actions.removeAll()
        }
        let carol = Route(address: try! SocketAddress(ipAddress: "127.0.0.2", port: 6000), relayId: "other")
        core.storeAnswered(.lookup(user: "carol", .single(carol, known: true)), now: Self.now, into: &actions)
        core.storeAnswered(.lookup(user: "dave", .single(nil, known: true)), now: Self.now, into: &actions)
        core.connectionOpened(Self.fuzzedConnection, peer: nil, now: Self.now, into: &actions)
    }

    /// `payload` sealed as alice's next datagram.
    mutating func sealedByAlice(_ payload: ByteBuffer) -> ByteBuffer {
        aliceSealer.seal(payload: payload)
    }

    /// Routes a datagram as the relay's engine does; answers store lookups with "no such
    /// user". A delivered datagram must be one its receiver can use.
    mutating func receive(datagram: ByteBuffer, decoded: Result<SIMPMessage, Error>) throws {
        var actions: [RelayAction] = []
        core.datagramReceived(datagram, from: Self.peer, now: Self.now, into: &actions)
        for case .deliver(let user, _, let address) in actions {
            guard case .success(let message) = decoded, message.kind.isContent || message.kind == .receipt || message.kind.isNeverStored else {
                throw FuzzViolation("delivered to \(user) at \(address) a datagram it cannot use: \(decoded)")
            }
        }
        try FuzzChecks.sendsAreEncodable(actions)
        for case .store(.lookup(let user)) in actions {
            var answered: [RelayAction] = []
            core.storeAnswered(.lookup(user: user, .single(nil, known: false)), now: Self.now, into: &answered)
            try FuzzChecks.sendsAreEncodable(answered)
        }
    }

    /// Feeds frames to the fuzzed connection as the relay's control handler does, completing
    /// registrations as the store would, until the relay closes the connection.
    mutating func receive(control stream: ControlStream, registrationSucceeds: Bool) throws {
        let connection = Self.fuzzedConnection
        for payload in stream.payloads {
            var actions: [RelayAction] = []
            do {
                if core.receiptFrameReceived(payload, on: connection, now: Self.now, into: &actions) {
                    try FuzzChecks.sendsAreEncodable(actions)
                    continue
                }
                let message = try MessageCodec.decode(payload)
                try FuzzChecks.roundTrips(message)
                core.controlReceived(message, on: connection, peer: Self.peer, now: Self.now, into: &actions)
            } catch let violation as FuzzViolation {
                throw violation
            } catch {
                core.malformedControl(payload, on: connection, detail: "\(error)", now: Self.now, into: &actions)
            }
            for case .store(let request) in actions {
                guard case .register(_, let connection) = request else { continue }
                if registrationSucceeds {
                    core.storeAnswered(.register(connection: connection, knownDevices: 1, elsewhere: false), now: Self.now, into: &actions)
                } else {
                    core.storeFailed(request, StoreFailure("fuzz"), now: Self.now, into: &actions)
                }
            }
            try FuzzChecks.sendsAreEncodable(actions)
            if actions.contains(.close(connection)) { break }
        }
        var closing: [RelayAction] = []
        core.connectionClosed(connection, into: &closing)
        try FuzzChecks.sendsAreEncodable(closing)
    }
}
