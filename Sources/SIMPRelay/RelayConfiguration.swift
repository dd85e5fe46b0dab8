import Logging
import NIOCore
import Prometheus
import SIMPCore
import SIMPRedis

/// Everything a relay needs to start.
public struct RelayConfiguration: Sendable {
    /// Address to listen on (TCP and UDP).
    public var host: String = "127.0.0.1"
    /// TCP control port; 0 picks a free one. The UDP port's default (`port + 1`) follows it.
    public var port: Int = 7600
    /// Further TCP control ports of the same relay (0 picks a free one), for networks that
    /// only let some ports out (443): a client may log in on any of them. They do not move the
    /// UDP port, which CONNECTED tells every client (docs/PROTOCOL.md §1).
    public var additionalPorts: [Int] = []
    /// UDP data port; nil means `port + 1` (the original SIMP layout), 0 picks a free one.
    public var udpPort: Int?
    /// The Redis server or Redis Cluster holding the relays' state (docs/OPERATIONS.md §4).
    public var redisEndpoint: RedisEndpoint = .single(RedisURL(host: "127.0.0.1"))
    /// One Redis server (setting it chooses single-server mode); on a cluster, its first seed.
    public var redis: RedisURL {
        get {
            switch redisEndpoint {
            case .single(let url): return url
            case .cluster(let seeds): return seeds[0]
            }
        }
        set { redisEndpoint = .single(newValue) }
    }
    /// This relay's id in Redis; unique per running relay.
    public var relayId: String = "relay-" + String(UInt32.random(in: .min ... .max), radix: 16)
    /// Seconds a user's registration survives in Redis without a refresh; live sessions
    /// refresh every third of it.
    public var registrationTTLSeconds: Int = 30
    /// How long a route read from Redis is used before Redis is asked again. Moves announced on
    /// `simp:relays:moves` end it earlier; this bounds a stale route when an announcement is lost.
    public var routeCacheTTL: TimeAmount = .seconds(2)
    /// Largest control frame payload accepted.
    public var maxFrameSize: Int = Framing.defaultMaxFrameSize
    /// TLS on the control channel (nil: plain TCP, for development; the relay warns at start).
    public var tls: ControlTLSFiles?
    /// Largest datagram accepted; larger ones are dropped and counted.
    public var maxDatagramSize: Int = SealedDatagram.defaultMaxDatagramSize
    /// PING a client silent for an interval; a client silent for `missLimit` intervals is dropped.
    public var heartbeat = HeartbeatPolicy.relay
    /// Datagrams read per system call (recvmmsg).
    public var datagramVectorReadCount: Int = 32
    /// After each read burst, how long the UDP socket is left unread so that datagrams arriving
    /// meanwhile share one wake-up (`--datagram-read-hold`). Zero (the default) reads each
    /// datagram as it arrives; a hold trades up to its length in added latency for fewer
    /// wake-ups and system calls per message at moderate rates (docs/OPERATIONS.md §1).
    public var datagramReadHold: TimeAmount = .zero
    public var logger: Logger = Logger(label: "simp.relay")
    /// Port of the Prometheus endpoint (`GET /metrics` on `host`); nil serves none, 0 picks a free one.
    public var metricsPort: Int?
    /// How the endpoint's `simp_inbox_*` figures are sampled from Redis in the background.
    public var inboxSampling = InboxSamplingSchedule.standard
    /// Registry the relay's metrics are recorded in and /metrics exports. Nil: with a
    /// `metricsPort`, a registry of the relay's own; without, the global `MetricsSystem`.
    public var metricsRegistry: PrometheusCollectorRegistry?
    /// On shutdown, how long the relay waits for receipts of datagrams it already forwarded
    /// before it closes the control connections.
    public var drainTimeout: TimeAmount = .seconds(5)
    /// The drain ends early once no receipt has been routed for this long.
    public var drainQuietPeriod: TimeAmount = .milliseconds(500)

    /// Entries kept per user's log; a full log refuses new messages (their senders told INBOX_FULL, they retry).
    public var inboxMaxMessages: Int = 1000
    /// Seconds a message may wait in an offline inbox before it is discarded (its sender told).
    public var inboxTTLSeconds: Int = 7 * 24 * 3600
    /// The largest file held for a receiver who is offline, in bytes; 0: none is held
    /// (docs/PROTOCOL.md §5.7).
    public var heldFileMaxBytes = RelayCore.Configuration.defaultMaxHeldFileBytes
    /// Bytes of files one sender may have held at once.
    public var heldFilesMaxBytesPerUser = RedisRelayStore.Limits.defaultHeldFilesMaxBytesPerUser
    /// Seconds a held file is kept after its last chunk arrived (deleted earlier once every
    /// device of its receiver has it).
    public var heldFileRetentionSeconds: Int = HeldFileRetention.defaultSeconds
    /// Whether users must log in with a password (docs/PROTOCOL.md §3). Turning it off is for
    /// development only: anyone can then claim any user, and the relay says so loudly.
    public var requireLogin = true
    /// Whether users may log in with a password; false: only access tokens (`--no-password-login`).
    public var passwordLogin = true
    /// Access-token logins (docs/PROTOCOL.md §4.9): the JWKS file and the claims required; nil:
    /// the relay takes no tokens.
    public var accessTokens: AccessTokenSettings?
    /// Content datagrams accepted per user (a token bucket: rate and burst).
    public var messageLimit = RelayCore.Configuration.defaultMessageLimit
    /// New control connections accepted per IP address.
    public var connectionLimit = RelayCore.Configuration.defaultConnectionLimit
    /// Control connections open at once per IP address.
    public var maxConnectionsPerHost = RelayCore.Configuration.defaultMaxConnectionsPerHost
    /// Login attempts accepted per IP address.
    public var loginLimit = RelayCore.Configuration.defaultLoginLimit
    /// The login deadline, the caps on connections not logged in, and the budgets of control
    /// requests (docs/OPERATIONS.md §10).
    public var limits = RelayLimits()

    /// Event loops the relay uses: one relay core per loop, all on the same TCP and UDP ports
    /// (`SO_REUSEPORT`; the kernel spreads control connections over them and steers each
    /// datagram to the loop holding its session). 1 serves everything from one loop.
    public var threads = 1
    /// Which of `threads` relays of one process this configuration is for (set by `RelayShards`).
    var shard: SessionIdClass?

    public init() {}

    /// The core's settings derived from these.
    func coreConfiguration() -> RelayCore.Configuration {
        var core = RelayCore.Configuration(relayId: relayId, udpPort: 0)
        core.requireLogin = requireLogin
        core.passwordLogin = passwordLogin
        if let tokens = accessTokens {
            core.tokens = AccessTokenPolicy(
                audience: tokens.audience, issuer: tokens.issuer, leewayMillis: tokens.leewayMillis,
                loopbackOnly: tls == nil && !tokens.allowWithoutTLS)
        }
        core.messageLimit = messageLimit
        core.connectionLimit = connectionLimit
        core.maxConnectionsPerHost = maxConnectionsPerHost
        core.loginLimit = loginLimit
        core.limits = limits
        core.routeCacheTTL = routeCacheTTL
        core.inboxTTLMillis = Int64(inboxTTLSeconds) * 1000
        core.maxHeldFileBytes = heldFileMaxBytes
        core.heartbeat = heartbeat
        core.refreshInterval = .milliseconds(Int64(registrationTTLSeconds) * 1000 / 3)
        core.drainTimeout = drainTimeout
        core.drainQuietPeriod = drainQuietPeriod
        core.maxDatagramSize = maxDatagramSize
        if let shard { core.sessionIdClass = shard }
        return core
    }

    /// The store's settings derived from these.
    var storeLimits: RedisRelayStore.Limits {
        var limits = RedisRelayStore.Limits()
        limits.registrationTTLSeconds = registrationTTLSeconds
        limits.inboxMaxMessages = inboxMaxMessages
        limits.inboxTTLSeconds = inboxTTLSeconds
        limits.heldFilesMaxBytesPerUser = heldFilesMaxBytesPerUser
        limits.heldFileRetentionSeconds = heldFileRetentionSeconds
        limits.maxDevicesPerUser = self.limits.maxDevicesPerUser
        return limits
    }

    /// The UDP port to bind, after applying the `port + 1` default.
    public var effectiveUDPPort: Int {
        if let udpPort { return udpPort }
        return port == 0 ? 0 : port + 1
    }
}
