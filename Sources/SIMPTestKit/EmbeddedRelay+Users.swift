import NIOCore
import NIOEmbedded
import SIMPCore

/// A user's side of an `EmbeddedRelay`: its control channel, UDP address and session keys.
public struct EmbeddedUser {
    /// The user's control connection to the relay.
    public var control: EmbeddedChannel
    /// Where the user's datagrams come from: the control connection's IP, its UDP port.
    public var address: SocketAddress
    /// Seals the user's datagrams with the session keys CONNECTED gave.
    public var sealer: DatagramSealer
    /// Opens what the relay sealed for the user (and keeps its replay window).
    public var opener: DatagramOpener
}

/// A frame or datagram that is not what the caller expected.
public struct UnexpectedFrame: Error, CustomStringConvertible {
    /// What was expected, and what came instead.
    public let description: String
}

/// `message`, if it is of `kind`; otherwise an `UnexpectedFrame` error.
public func unwrapFrame(_ message: SIMPMessage?, kind: SIMPMessage.Kind) throws -> SIMPMessage {
    guard let message, message.kind == kind else { throw UnexpectedFrame(description: "expected \(kind), got \(String(describing: message))") }
    return message
}

/// Playing the clients: users that connect, send frames and sealed datagrams, and read what the
/// relay wrote to them (channels opened without sinks).
extension EmbeddedRelay {
    /// Opens a control connection from 127.0.0.1:`port` (its UDP port is `port + 1`).
    public func open(port: Int) throws -> EmbeddedChannel {
        try open(from: SocketAddress(ipAddress: "127.0.0.1", port: port))
    }

    /// Connects `user` (development mode: CONNECT without login), waits for CONNECTED and says HELLO.
    public func connect(_ user: String, port: Int) throws {
        let control = try open(port: port)
        var connect = SIMPMessage(kind: .connect, fromUser: user)
        connect.udpPort = UInt32(port + 1)
        try send(connect, on: control)
        let connected = try unwrapFrame(read(from: control), kind: .connected)
        let keys = SessionKeys(sessionId: connected.sessionId, secret: connected.sessionSecret)
        users[user] = EmbeddedUser(
            control: control, address: try SocketAddress(ipAddress: "127.0.0.1", port: port + 1),
            sealer: DatagramSealer(keys: keys, direction: .uplink), opener: DatagramOpener(keys: keys, direction: .downlink))
        // HELLO, as a real client says it: the relay answers, and starts the user's inbox.
        try sendDatagram(SIMPMessage(kind: .hello, fromUser: user))
        var others: [(user: String, message: SIMPMessage)] = []
        while let datagram = try readDatagram(), datagram.message.kind != .hello { others.append(datagram) }
        unread = others + unread // what came with the answer (stored messages) is still to be read
    }

    /// Writes `message` as a frame on `control` and lets the loop (and the store) answer.
    public func send(_ message: SIMPMessage, on control: EmbeddedChannel) throws {
        var frame = ByteBuffer()
        Framing.writeFrame(message, into: &frame)
        try receive(frame, on: control)
    }

    /// The next control message the relay wrote on `control`, if any.
    public func read(from control: EmbeddedChannel) throws -> SIMPMessage? {
        guard var bytes = try control.readOutbound(as: ByteBuffer.self) else { return nil }
        guard let payload = try Framing.nextFrame(in: &bytes, maxFrameSize: Framing.defaultMaxFrameSize) else { return nil }
        return try MessageCodec.decode(payload)
    }

    /// `message` as a datagram sealed by its `fromUser`'s client, arriving from that client.
    public func sendDatagram(_ message: SIMPMessage) throws {
        guard let address = users[message.fromUser]?.address else { throw UnexpectedFrame(description: "\(message.fromUser) is not connected") }
        let sealed = users[message.fromUser]!.sealer.seal(message) // the sealer's counter moves on
        try receiveDatagram(sealed, from: address)
    }

    /// The next datagram the relay sent, opened by the user it was addressed to.
    public func readDatagram() throws -> (user: String, message: SIMPMessage)? {
        if !unread.isEmpty { return unread.removeFirst() }
        guard let envelope = try datagrams.readOutbound(as: AddressedEnvelope<ByteBuffer>.self) else { return nil }
        guard let user = users.first(where: { $0.value.address == envelope.remoteAddress })?.key else { return nil }
        let payload = try users[user]!.opener.open(envelope.data).payload // the opener keeps its replay window
        return (user, try MessageCodec.decode(payload))
    }

    /// `user`'s control channel.
    public func control(of user: String) -> EmbeddedChannel { users[user]!.control }
}
