import NIOCore
import SIMPCore
import XCTest

/// A development-mode `RelayCore` (CONNECT without login, the session secret in CONNECTED)
/// and, for each connected user, what its client holds: address and session keys. Lets core
/// tests send sealed datagrams and read what the relay seals for a user.
struct DevRelay {
    var core: RelayCore
    private(set) var clients: [String: (address: SocketAddress, sealer: DatagramSealer, opener: DatagramOpener)] = [:]

    init(relayId: String = "r1", udpPort: Int = 7000, configure: (inout RelayCore.Configuration) -> Void = { _ in }) {
        var configuration = RelayCore.Configuration(relayId: relayId, udpPort: udpPort)
        configuration.requireLogin = false
        configure(&configuration)
        core = RelayCore(configuration: configuration)
    }

    /// Opens `connection`, connects `user` with UDP port `port` and completes the registration;
    /// returns the actions of the completion.
    @discardableResult
    mutating func connect(_ user: String, on connection: ConnectionID, port: Int, now: NIODeadline) -> [RelayCore.Action] {
        core.connectionOpened(connection, now: now)
        var connect = SIMPMessage(kind: .connect, fromUser: user)
        connect.udpPort = UInt32(port)
        let peer = try! SocketAddress(ipAddress: "127.0.0.1", port: 40_000 + Int(connection.rawValue))
        _ = core.controlReceived(connect, on: connection, peer: peer, now: now)
        let actions = core.registrationCompleted(connection, succeeded: true)
        for case .send(_, let connected) in actions where connected.kind == .connected {
            let keys = SessionKeys(sessionId: connected.sessionId, secret: connected.sessionSecret)
            var address = peer
            address.port = port
            clients[user] = (address, DatagramSealer(keys: keys, direction: .uplink), DatagramOpener(keys: keys, direction: .downlink))
        }
        return actions
    }

    /// `message` as a datagram sealed by its `fromUser`'s client, from that client's address.
    mutating func send(_ message: SIMPMessage, now: NIODeadline) -> [RelayCore.Action] {
        let user = message.fromUser
        let sealed = clients[user]!.sealer.seal(message)
        return core.datagramReceived(sealed, from: clients[user]!.address, now: now)
    }

    /// What `user`'s client reads from a datagram the relay sealed for it.
    mutating func open(_ bytes: ByteBuffer, as user: String) throws -> SIMPMessage {
        try MessageCodec.decode(try clients[user]!.opener.open(bytes).payload)
    }

    /// The messages of the `.deliver` actions for `user` in `actions`, opened.
    mutating func delivered(to user: String, in actions: [RelayCore.Action]) throws -> [SIMPMessage] {
        var messages: [SIMPMessage] = []
        for case .deliver(let recipient, let bytes, _) in actions where recipient == user {
            messages.append(try open(bytes, as: user))
        }
        return messages
    }
}
