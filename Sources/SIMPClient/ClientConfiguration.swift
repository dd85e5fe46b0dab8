import Logging
import Metrics
import NIOCore
import SIMPCore
import Synchronization

/// Everything a client needs to connect.
public struct ClientConfiguration: Sendable {
    /// The (first) relay's control address.
    public var serverHost: String
    public var serverPort: Int
    /// Further relays (sharing the first one's Redis), tried in turn when the current one cannot
    /// be reached or is lost.
    public var fallbackServers: [RelayEndpoint] = []
    /// This client's user id.
    public var user: String
    /// The user's password (nil for a relay that does not authenticate). It never goes on the
    /// wire: the login proves it by challenge-response (docs/PROTOCOL.md §3).
    public var password: String?
    /// Log in with an access token from here instead of a password, and renew it on the same
    /// connection before it expires (docs/PROTOCOL.md §4.9); nil: password login.
    public var accessToken: AccessTokenSource?
    /// The device this session runs on, sent in AUTH and CONNECT (docs/PROTOCOL.md §4.7): a
    /// newer session of the same device replaces this one; other devices are untouched. Empty:
    /// the user's default device on the relay. `DeviceLock` picks one for command-line clients.
    public var device: String = ""
    /// A session that only sends: it never receives content or stored messages, and never
    /// replaces the device's receiving session (`simp send`).
    public var sendOnly = false
    /// Presence off: the relay shows this user's presence and last-seen to nobody, contacts
    /// and room members included (docs/PROTOCOL.md §4.8). A receiving session's login decides.
    public var hidePresence = false
    /// Where messages wait until their outcome is known, across restarts (nil: memory only).
    public var outbox: Outbox?
    /// Local address for the UDP socket; port 0 picks a free one.
    public var localHost: String = "0.0.0.0"
    public var localUDPPort: Int = 0
    /// Where to send datagrams instead of the relay's own UDP address (e.g. an impairment proxy).
    public var datagramTarget: SocketAddress?
    /// The UDP port to register instead of the bound one, so the relay's datagrams reach a proxy
    /// that forwards them to this client (impairment in the relay → client direction).
    public var advertisedUDPPort: Int?
    public var retransmit = RetransmitPolicy()
    /// Content transmissions are paced under this rate (`SendPacer`) unless the relay announces
    /// its own in CONNECTED (then at 90 % of that); nil sends unpaced.
    public var pacing: RateLimit? = ClientSession.defaultPacing
    /// PING the relay when it was silent for an interval; a relay silent for `missLimit` intervals is given up.
    public var heartbeat = HeartbeatPolicy.client
    /// Reconnect automatically after losing the relay (nil: report the loss and stop).
    public var reconnect: ReconnectPolicy? = ReconnectPolicy()
    /// A keepalive datagram (a HELLO probe, answered) to the relay this often keeps a NAT
    /// mapping of the UDP port open (`ClientSession.Configuration.keepaliveInterval`).
    public var keepaliveInterval = ClientSession.defaultKeepaliveInterval
    /// How long a message that arrived before an earlier one of its conversation waits for it;
    /// then the gap is skipped (the earlier one, if it comes, is still delivered, late).
    public var orderingHoldLimit: TimeAmount = .seconds(30)
    /// Receipt a message held behind a gap only once the application has it, with a HELD
    /// receipt on arrival meanwhile (`ClientSession.Configuration.receiptsWhenReleased`).
    public var receiptsWhenReleased = true
    /// Receipts go out in batches, one per sender (docs/PROTOCOL.md §6.1;
    /// `ClientSession.Configuration.batchesReceipts`); false sends one receipt per message.
    public var batchesReceipts = true
    /// How long a batched receipt waits for others to the same sender (10 ms); zero sends the
    /// receipts at the end of each burst of datagram reads
    /// (`ClientSession.Configuration.receiptBatchDelay`).
    public var receiptBatchDelay = ReceiptBatcher.defaultDelay
    /// Called with each message on the client's event loop before its receipt is written: what
    /// it does (print the line, as `simp listen` does; append it to the history, as `simp chat`
    /// does) is done before the sender is told the message arrived. It returns whether the
    /// message is new to the application: only then does it also go to `SIMPClient.messages`.
    /// False means the application had it already (a copy delivered again after a restart,
    /// docs/PROTOCOL.md §6.4); it is receipted all the same. Keep it short.
    public var messageHandler: (@Sendable (SIMPMessage) -> Bool)?
    /// As `messageHandler`, with what the client knows of where the message came from (end to
    /// end encrypted or not, the sending device and whether the user verified it): called
    /// instead of `messageHandler` when set (`simp listen` marks each line with it).
    public var originHandler: (@Sendable (SIMPMessage, MessageOrigin) -> Bool)?
    /// The application takes at most this many new messages (`simp listen --count`); nil: no
    /// limit. Later ones are neither handed over nor receipted, so they stay with their senders
    /// or in the relay's log for the next session (`ClientSession.stopTakingMessages`). Receipts
    /// are then sent one per message.
    public var deliveryLimit: Int?
    /// TLS on the control channel (nil: plain TCP, for a development relay; the client warns
    /// when such a relay is not on this machine).
    public var tls: ClientTLS?
    /// How long to wait for the relay to accept CONNECT.
    public var connectTimeout: TimeAmount = .seconds(5)
    public var maxFrameSize: Int = Framing.defaultMaxFrameSize
    public var logger: Logger = Logger(label: "simp.client")
    /// For tests (and the lab): while it blocks, the client's UDP socket drops every datagram it
    /// would send and every one it receives, as a network that blocks UDP does (TCP untouched).
    public var udpBlock: UDPBlock?
    /// Where the client's retransmit and RTT metrics go (see `ClientMetrics`).
    public var metricsFactory: MetricsFactory = MetricsSystem.factory
    /// End-to-end encryption of direct messages (docs/PROTOCOL.md §4.8); nil: off (messages
    /// go as the relay sees them). The `simp` command turns it on.
    public var endToEnd: EndToEndSettings?

    public init(serverHost: String, serverPort: Int, user: String, password: String? = nil) {
        self.serverHost = serverHost
        self.serverPort = serverPort
        self.user = user
        self.password = password
    }

    /// A configuration that tries `servers` in order (at least one).
    public init(servers: [RelayEndpoint], user: String) {
        precondition(!servers.isEmpty, "a client needs at least one relay")
        self.init(serverHost: servers[0].host, serverPort: servers[0].port, user: user)
        fallbackServers = Array(servers.dropFirst())
    }

    /// Every relay the client may use, the first one first.
    public var servers: [RelayEndpoint] {
        [RelayEndpoint(host: serverHost, port: serverPort)] + fallbackServers
    }
}

/// A relay's control address.
public struct RelayEndpoint: Equatable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// Why a client could not connect or lost its relay.
public enum SIMPClientError: Error, Equatable, CustomStringConvertible {
    case cannotConnect(String)
    case rejected(SIMPMessage.ErrorCode, String)
    case timedOut(String)
    case connectionLost
    /// A newer session of the same device took this one's place; the client does not fight
    /// it by reconnecting.
    case takenOver(device: String)
    /// The message cannot be sent end to end encrypted (the receiver published no keys, or the
    /// relay keeps none) and unencrypted sending was not allowed (`--no-e2e`).
    case notEncryptable(String)
    /// The call came after `SIMPClient.close()`: a closed client sends nothing and does not
    /// connect again (make a new `SIMPClient`). Its reporting accessors (`statistics()` and
    /// the like) still answer, with what it knew when it closed.
    case closed

    public var description: String {
        switch self {
        case .cannotConnect(let reason): return "cannot reach relay \(reason)"
        case .rejected(let code, let text): return "relay refused: \(text) (\(code))"
        case .timedOut(let what): return "timed out \(what)"
        case .connectionLost: return ClientSession.Stop.connectionLostText
        case .takenOver(let device): return ClientSession.Stop.takenOverText(device: device)
        case .notEncryptable(let reason): return "not sent: \(reason)"
        case .closed: return "the client is closed (close() was called): it sends nothing and does not reconnect; make a new client"
        }
    }
}

/// Where a client stands with its relay; `SIMPClient.connectionStates` reports every change.
public enum ConnectionState: Equatable, Sendable {
    /// Connecting (or registering) for the first time.
    case connecting
    /// Registered with the relay `relayId`.
    case connected(relayId: String)
    /// The connection was lost; the next attempt (1-based) starts after `delay`.
    case reconnecting(attempt: Int, delay: TimeAmount)
    /// Not connected and not trying: closed by the user, or the connection was lost without
    /// automatic reconnection. `reason` says which.
    case offline(reason: String)
}

/// The outcome of sending one message.
public enum SendResult: Equatable, Sendable {
    /// The receiver's receipt arrived `latency` after the first transmission.
    case delivered(messageId: UInt64, latency: TimeAmount, attempts: Int)
    case failed(messageId: UInt64, DeliveryFailure)
    /// The relay took custody ("sent", not yet delivered): the receiver is offline, or, with
    /// `receiverOnline`, one of its several devices is online and is getting it now.
    /// `SIMPClient.notices` reports when it is delivered (or discarded).
    case stored(messageId: UInt64, receiverOnline: Bool = false)
    /// The control channel closed before the outcome was known.
    case connectionLost(messageId: UInt64)
}

/// A switch that makes a client's UDP socket drop everything (`ClientConfiguration.udpBlock`),
/// from the start or from any moment, and let it through again: UDP blocked in-process, for
/// tests and the lab.
public final class UDPBlock: Sendable {
    private let blocking: Mutex<Bool>

    /// A switch that blocks from the start if `blocking`.
    public init(blocking: Bool = true) { self.blocking = Mutex(blocking) }

    /// Whether datagrams are dropped now; set it from any thread.
    public var isBlocking: Bool {
        get { blocking.withLock { $0 } }
        set { blocking.withLock { $0 = newValue } }
    }
}
