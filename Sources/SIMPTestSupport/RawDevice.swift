import NIOConcurrencyHelpers
import NIOCore
import SIMPCore

/// One device of a user, played by hand: a control connection logged in for a named device
/// (receiving or send-only) and a UDP socket, with the session's keys. It seals what it sends,
/// opens what the relay sends it, and receipts content over the control channel when told to
/// (`receiptNew`), so tests can decide exactly when the "application" has a message.
public final class RawDevice: Sendable {
    /// The user this device belongs to.
    public let user: String
    /// The device name it logged in with.
    public let device: String
    /// Its control connection.
    public let control = RawControlConnection()
    private let socket = RawDatagramSocket()
    private let relayUDP: SocketAddress
    private let state: NIOLockedValueBox<State>
    private let closing = NIOLockedValueBox(false)

    private struct State {
        var sealer: DatagramSealer
        var opener: DatagramOpener
        var opened = 0
        var messages: [SIMPMessage] = []
        /// TYPING datagrams the relay sent this device, in arrival order.
        var typing: [SIMPMessage] = []
        var helloAnswered = false
        var receipted: Set<String> = []
    }

    /// Logs `user` in on the relay at `controlPort` as `device` (send-only if `sendOnly`; as a
    /// client from before batch receipts if `acceptsBatchReceipts` is false) and says HELLO on
    /// the data path.
    public init(
        user: String, password: String?, device: String, sendOnly: Bool = false, acceptsBatchReceipts: Bool = true, controlPort: Int
    ) async throws {
        self.user = user
        self.device = device
        try await socket.bind()
        try await control.connect(port: controlPort)
        let keys = try await control.login(
            user: user, password: password, udpPort: socket.port, device: device, sendOnly: sendOnly, acceptsBatchReceipts: acceptsBatchReceipts)
        guard let connected = try await control.first(.connected) else { throw RawPeerError("no CONNECTED") }
        relayUDP = try SocketAddress(ipAddress: "127.0.0.1", port: Int(connected.udpPort))
        state = NIOLockedValueBox(
            State(
                sealer: DatagramSealer(keys: keys, direction: .uplink),
                opener: DatagramOpener(keys: keys, direction: .downlink)))
        try await send(SIMPMessage(kind: .hello, fromUser: user))
    }

    /// Seals `message` and sends it to the relay's data port.
    public func send(_ message: SIMPMessage) async throws {
        let bytes = state.withLockedValue { $0.sealer.seal(message) }
        try await socket.send(bytes, to: relayUDP)
    }

    /// Sends text message `id` (stream `stream`, sequence `seq`) to `recipient`.
    public func sendText(_ id: UInt64, to recipient: String, stream: UInt64 = 1, seq: UInt64 = 0, floor: UInt64 = 0) async throws {
        var message = SIMPMessage(kind: .text, messageId: id, fromUser: user, toUser: recipient, content: "text \(id)")
        message.stream = stream
        message.seq = seq
        message.floor = floor
        message.attempt = 1
        try await send(message)
    }

    /// Content messages the relay sent this device, in arrival order, each (sender, id) once.
    public func messages() async throws -> [SIMPMessage] {
        let datagrams = try await socket.received()
        return state.withLockedValue { state in
            for bytes in datagrams.dropFirst(state.opened) {
                state.opened += 1
                guard let opened = try? state.opener.open(bytes), let message = try? MessageCodec.decode(opened.payload) else { continue }
                if message.kind == .typing { state.typing.append(message) }
                if message.kind == .hello { state.helloAnswered = true }
                guard message.kind.isContent,
                    !state.messages.contains(where: { $0.fromUser == message.fromUser && $0.messageId == message.messageId })
                else { continue }
                state.messages.append(message)
            }
            return state.messages
        }
    }

    /// TYPING datagrams the relay sent this device, in arrival order.
    public func typing() async throws -> [SIMPMessage] {
        _ = try await messages()
        return state.withLockedValue { $0.typing }
    }

    /// Whether the relay answered this device's HELLO (the relay asks for a receiving
    /// device's stored messages in the same step).
    public func helloAnswered() async throws -> Bool {
        _ = try await messages()
        return state.withLockedValue { $0.helloAnswered }
    }

    /// Receipts (on the control channel, in one write) every content message received and not
    /// yet receipted, up to `limit` of them, oldest first; returns how many it receipted.
    @discardableResult
    public func receiptNew(limit: Int = .max) async throws -> Int {
        let fresh = try await messages().filter { !state.withLockedValue { $0.receipted }.contains("\($0.fromUser)/\($0.messageId)") }
        let chosen = Array(fresh.prefix(limit))
        guard !chosen.isEmpty else { return 0 }
        try await control.send(chosen.map { $0.receipt(holdMicros: 0) })
        state.withLockedValue { state in
            for message in chosen { state.receipted.insert("\(message.fromUser)/\(message.messageId)") }
        }
        return chosen.count
    }

    /// Control frames of `kind` received so far.
    public func frames(_ kind: SIMPMessage.Kind) async throws -> [SIMPMessage] {
        try await control.received().filter { $0.kind == kind }
    }

    /// Closes the connection and the socket (once; later calls do nothing).
    public func close() async {
        guard
            closing.withLockedValue({ closed in
                defer { closed = true }; return !closed
            })
        else { return }
        await control.close()
        await socket.close()
    }
}
