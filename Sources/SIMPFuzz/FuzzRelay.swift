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
        core = RelayCore(configuration: configuration)
        for (number, user) in [(UInt64(1), "alice"), (2, "bob")] {
            let connection = ConnectionID(number)
            core.connectionOpened(connection, now: Self.now)
            var connect = SIMPMessage(kind: .connect, fromUser: user)
            connect.udpPort = UInt32(5000 + number)
            _ = core.controlReceived(connect, on: connection, peer: try! SocketAddress(ipAddress: "127.0.0.1", port: 30_000), now: Self.now)
            for case .send(_, let connected) in core.registrationCompleted(connection, succeeded: true) where user == "alice" {
                let keys = SessionKeys(sessionId: connected.sessionId, secret: connected.sessionSecret)
                aliceSealer = DatagramSealer(keys: keys, direction: .uplink)
            }
        }
        let carol = Route(address: try! SocketAddress(ipAddress: "127.0.0.2", port: 6000), relayId: "other")
        _ = core.lookupCompleted(user: "carol", route: carol, now: Self.now)
        _ = core.lookupCompleted(user: "dave", route: nil, known: true, now: Self.now)
        core.connectionOpened(Self.fuzzedConnection, now: Self.now)
    }

    /// `payload` sealed as alice's next datagram.
    mutating func sealedByAlice(_ payload: ByteBuffer) -> ByteBuffer {
        aliceSealer.seal(payload: payload)
    }

    /// Routes a datagram as the relay's datagram loop does; answers Redis lookups with "no
    /// such user". A forwarded datagram must be one its receiver can decode.
    mutating func receive(datagram: ByteBuffer, decoded: Result<SIMPMessage, Error>) throws {
        switch core.routeDatagram(datagram, from: Self.peer, now: Self.now) {
        case .deliver(let user, _, let address):
            guard case .success(let message) = decoded, message.kind.isContent || message.kind == .receipt || message.kind == .typing else {
                throw FuzzViolation("delivered to \(user) at \(address) a datagram it cannot use: \(decoded)")
            }
        case .actions(let actions):
            try FuzzChecks.sendsAreEncodable(actions)
            for case .lookup(let user) in actions {
                try FuzzChecks.sendsAreEncodable(core.lookupCompleted(user: user, route: nil, now: Self.now))
            }
        }
    }

    /// Feeds frames to the fuzzed connection as the relay's control handler does, completing
    /// registrations as Redis would, until the relay closes the connection.
    mutating func receive(control stream: ControlStream, registrationSucceeds: Bool) throws {
        let connection = Self.fuzzedConnection
        for payload in stream.payloads {
            var actions: [RelayCore.Action]
            do {
                let message = try MessageCodec.decode(payload)
                try FuzzChecks.roundTrips(message)
                actions = core.controlReceived(message, on: connection, peer: Self.peer, now: Self.now)
            } catch let violation as FuzzViolation {
                throw violation
            } catch {
                actions = core.malformedControl(on: connection, detail: "\(error)")
            }
            for case .register(_, _, _, let registering) in actions {
                actions += core.registrationCompleted(registering, succeeded: registrationSucceeds)
            }
            try FuzzChecks.sendsAreEncodable(actions)
            if actions.contains(where: { if case .close(connection) = $0 { return true } else { return false } }) { break }
        }
        try FuzzChecks.sendsAreEncodable(core.connectionClosed(connection))
    }
}
