import ArgumentParser
import Foundation
import Logging
import Metrics
import NIOCore
import NIOPosix
import Prometheus
import SIMPCommandLine
import SIMPCore
import SIMPRedis
import SIMPRelay
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif

extension String {
    var trimmingWhitespaceAtEnd: String {
        var text = self
        while text.last?.isWhitespace == true { text.removeLast() }
        return text
    }
}

/// Writes one line to standard error.
func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

struct SIMPServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simp-server",
        abstract: "The SIMP relay, and the commands that manage its users.",
        usage: """
            simp-server [<options>]
              simp-server serve [<options>]
              simp-server user add|remove|list|lock|unlock ...
              simp-server sessions [list|end USER] ...
              simp-server token keygen|issue ...
            """,
        discussion: """
            `simp-server [options]` runs the relay with the options below (`simp-server serve \
            [options]` is the same); `simp-server user add alice` creates a user who can then log in.

            Every option can also come from a TOML file (--config FILE: keys named like the \
            options, `port = 7600`, `no-login = true`) or from the environment (SIMP_ and the \
            option in capitals: SIMP_REDIS, SIMP_PORT, SIMP_TLS_CERT, SIMP_NO_LOGIN=true). Typed options \
            override the environment, which overrides the file; `simp-server --print-config` shows \
            the result.
            """,
        version: SIMPVersion.current,
        subcommands: [Serve.self, UserCommand.self, SessionsCommand.self, TokenCommand.self],
        defaultSubcommand: Serve.self)

    /// `--help` with the relay's options (the default subcommand's), which the parser's own
    /// help for a command with subcommands leaves out.
    static var helpWithRelayOptions: String {
        let root = helpMessage(), relay = Serve.helpMessage()
        guard let ownOptions = root.range(of: "OPTIONS:"), let subcommands = root.range(of: "SUBCOMMANDS:"),
            let relayOptions = relay.range(of: "OPTIONS:"), let help = relay.range(of: "  -h, --help")
        else { return root }
        return String(root[..<ownOptions.lowerBound]) + String(relay[relayOptions.lowerBound..<help.lowerBound])
            + "  --version               Show the version.\n" + String(relay[help.lowerBound...]).trimmingWhitespaceAtEnd
            + "\n\n" + String(root[subcommands.lowerBound...])
    }
}

/// One `--port` value: a port, or several separated by commas (`7600,443`, as
/// `SIMP_PORT` and a config file's string give them).
struct PortList: ExpressibleByArgument, Sendable {
    let ports: [Int]

    init(ports: [Int]) { self.ports = ports }

    init?(argument: String) {
        let ports = argument.split(separator: ",", omittingEmptySubsequences: false).map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !ports.isEmpty, ports.allSatisfy({ $0 != nil }) else { return nil }
        self.ports = ports.compactMap { $0 }
    }

    var defaultValueDescription: String { ports.map(String.init).joined(separator: ",") }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the relay: log users in over TCP, forward their messages over UDP.",
        discussion: """
            Clients connect to the TCP control port, log in (challenge-response: passwords never \
            cross the wire; create users with `simp-server user add`), register a UDP address, \
            and send sealed datagrams to the relay's UDP port (by default the first TCP port + 1). \
            Registrations are kept in Redis under simp:user:{<id>}; see docs/PROTOCOL.md. SIGINT or \
            SIGTERM stops accepting connections, keeps routing receipts for up to --drain-timeout \
            seconds, removes this relay's registrations and exits 0.
            """)

    @Option(help: ArgumentHelp("TOML file with settings (keys named like these options).", valueName: "file"))
    var config: String?

    @Flag(
        name: .customLong("print-config"),
        help: ArgumentHelp(
            "Print the settings in effect as a config file and exit, without starting.",
            discussion:
                "They come from the typed options, then the SIMP_* environment, then --config FILE, then the defaults; each is checked as a start would check it."
        ))
    var printConfig = false

    @Option(help: "Address to listen on (TCP and UDP).")
    var host = "127.0.0.1"

    @Option(
        name: .customLong("port"),
        help: ArgumentHelp(
            "TCP control port (0 picks a free one). Repeat it, or give a list (7600,443), to listen on several.",
            discussion:
                "Every control port serves the same relay, for clients on networks that only let some ports out (simp --server HOST:7600,HOST:443 tries them in order). The UDP port stays the FIRST port + 1 (or --udp-port) whichever port a client logs in on; CONNECTED tells it.",
            valueName: "port"))
    var portLists: [PortList] = [PortList(ports: [7600])]

    @Option(name: .customLong("udp-port"), help: "UDP data port. Default: the first TCP port + 1.")
    var udpPort: Int?

    /// Every control port, the first (which sets the UDP port's default) first.
    var ports: [Int] { portLists.flatMap(\.ports) }
    /// The first control port.
    var port: Int { ports.first ?? 7600 }

    @Option(
        help:
            "Redis server holding the registry: redis://[[USER]:PASSWORD@]HOST:PORT[/DB], or rediss://…[?ca=FILE&cert=FILE&key=FILE] for TLS; a Redis Cluster: redis+cluster://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT…] (or rediss+cluster://…) (docs/OPERATIONS.md §4)."
    )
    var redis = "redis://127.0.0.1:6379"

    @Option(
        name: .customLong("relay-id"),
        help: ArgumentHelp(
            "This relay's id in Redis, unique among the relays sharing it (no spaces). Default: relay-<random hex>, new at each start.",
            discussion:
                "Give one that stays the same across restarts (the systemd unit in dist/ gives the host name): a restarted relay then takes over its own registrations at once."
        ))
    var relayId: String?

    @Option(
        name: .customLong("registration-ttl"),
        help:
            "Seconds this relay's heartbeat key lives in Redis without a renewal (renewed every TTL/30); it vouches for all the relay's registrations, whose users count as offline once it expires."
    )
    var registrationTTL = 30

    @Option(name: .customLong("max-frame-size"), help: "Largest control frame payload in bytes.")
    var maxFrameSize = 65536

    @Option(name: .customLong("max-datagram-size"), help: "Largest datagram in bytes; larger ones are dropped.")
    var maxDatagramSize = 8192

    @Option(
        name: .customLong("datagram-read-hold"),
        help: ArgumentHelp(
            "Microseconds the UDP socket is left unread after each read, so that datagrams arriving meanwhile share one wake-up: less CPU per message at moderate rates, for up to this much added latency. 0 (default): each datagram is read as it arrives.",
            valueName: "µs"))
    var datagramReadHold = 0

    @Option(
        name: .customLong("ping-interval"),
        help:
            "Seconds a client may be silent before it is sent a PING (and again every interval while it stays silent); a client that sent anything within the interval is not pinged. A client silent for 5 s that a message is forwarded to is pinged at once, and dropped if it stays silent 10 s more."
    )
    var pingInterval = Double(HeartbeatPolicy.relay.interval.nanoseconds) / 1e9

    @Option(
        name: .customLong("ping-misses"),
        help: "A client silent for this many ping intervals (240 s at the defaults) is dropped and unregistered; messages to it are then stored.")
    var pingMisses = HeartbeatPolicy.relay.missLimit

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = "info"

    @Option(name: .customLong("log-format"), help: "text (readable lines) or json (one JSON object per line, for log shippers).")
    var logFormat = "text"

    @Option(name: .customLong("metrics-port"), help: "Serve Prometheus metrics at http://HOST:PORT/metrics (HOST is --host). Default: none.")
    var metricsPort: Int?

    @Option(
        name: .customLong("drain-timeout"),
        help: "On SIGTERM/SIGINT, seconds to keep routing receipts of datagrams already forwarded before closing connections.")
    var drainTimeout = 5.0

    @Flag(
        name: .customLong("no-login"),
        help: ArgumentHelp(
            "Development only: accept any user without a password.",
            discussion: "Anyone who can reach the relay can then claim any user id. Datagrams are still sealed, but the session keys travel in clear."
        ))
    var noLogin = false

    @Option(
        name: .customLong("tls-cert"),
        help: ArgumentHelp(
            "PEM file with the relay's TLS certificate (then any intermediates): TLS on the control channel.",
            discussion:
                "Give --tls-key with it. Without both the control channel is plain TCP, for development on loopback; the relay warns at start."))
    var tlsCert: String?

    @Option(name: .customLong("tls-key"), help: "PEM file with the private key of --tls-cert.")
    var tlsKey: String?

    @Option(
        name: .customLong("message-rate"),
        help:
            "Messages per second each user may send (with a burst of twice that); excess is dropped and the sender told. Clients learn it at login and pace themselves at 90 % of it."
    )
    var messageRate = RelayCore.Configuration.defaultMessageLimit.perSecond

    @Option(name: .customLong("connection-rate"), help: "New control connections per second from one IP address (burst: 10 times that).")
    var connectionRate = RelayCore.Configuration.defaultConnectionLimit.perSecond

    @Option(name: .customLong("max-connections-per-host"), help: "Control connections open at once from one IP address.")
    var maxConnectionsPerHost = RelayCore.Configuration.defaultMaxConnectionsPerHost

    @Option(name: .customLong("login-rate"), help: "Login attempts per second from one IP address (burst: 10 times that).")
    var loginRate = RelayCore.Configuration.defaultLoginLimit.perSecond

    @Option(
        name: .customLong("inbox-max-messages"),
        help:
            "Messages kept per user's offline log; when full, new messages are refused (their senders told INBOX_FULL; they retry) rather than stored ones dropped."
    )
    var inboxMaxMessages = 1000

    @Option(
        name: .customLong("inbox-ttl"),
        help: "Seconds a message waits in an offline user's inbox before it is discarded (its sender told). Default: 7 days.")
    var inboxTTL = 7 * 24 * 3600

    @Option(
        name: .customLong("file-store-max-file-bytes"),
        help:
            "The largest file (bytes) the relay holds for a receiver who is offline, so its sender may go; larger ones are refused (the sender told). 0: hold none. Default: 100 MiB."
    )
    var fileStoreMaxFileBytes = RelayCore.Configuration.defaultMaxHeldFileBytes

    @Option(
        name: .customLong("file-store-max-bytes-per-user"),
        help: "Bytes of files one sender may have held for offline receivers at once; a file past it is refused. Default: 1 GiB.")
    var fileStoreMaxBytesPerUser = RedisRelayStore.Limits.defaultHeldFilesMaxBytesPerUser

    @Option(
        name: .customLong("file-store-retention"),
        help:
            "Seconds a held file is kept after its last chunk arrived; it is deleted earlier once every device of its receiver has it. Default: 7 days."
    )
    var fileStoreRetention = 7 * 24 * 3600

    @Option(
        help:
            "Event loops (threads) serving clients: one relay core per loop, all on the same ports (SO_REUSEPORT; datagrams are steered to the loop holding their session). Each loop registers as relay ID-tK."
    )
    var threads = 1

    /// Limits against abuse (docs/OPERATIONS.md §10), listed with the other options.
    @OptionGroup
    var limitOptions: LimitOptions

    /// Access-token logins (docs/OPERATIONS.md, "Access tokens").
    @OptionGroup
    var tokenOptions: TokenOptions

    func validate() throws {
        guard (1...256).contains(threads) else { throw ValidationError("--threads must be 1-256") }
        guard messageRate > 0, connectionRate > 0, loginRate > 0 else {
            throw ValidationError("--message-rate, --connection-rate and --login-rate must be positive")
        }
        guard (tlsCert == nil) == (tlsKey == nil) else { throw ValidationError("--tls-cert and --tls-key go together") }
        guard maxConnectionsPerHost >= 1 else { throw ValidationError("--max-connections-per-host must be at least 1") }
        guard !ports.isEmpty, ports.allSatisfy({ (0...65535).contains($0) }) else { throw ValidationError("--port must be 0-65535") }
        let fixed = ports.filter { $0 != 0 }
        guard Set(fixed).count == fixed.count else {
            throw ValidationError("--port: each control port once, got \(ports.map(String.init).joined(separator: ","))")
        }
        if udpPort == nil, port != 0, ports.dropFirst().contains(port + 1) {
            throw ValidationError("--port \(port + 1) is the UDP port (the first --port + 1): pass --udp-port, or list the ports in another order")
        }
        if let relayId, relayId.isEmpty || relayId.contains(where: \.isWhitespace) {
            throw ValidationError("--relay-id must be non-empty and contain no spaces (it names Redis keys and channels)")
        }
        if let relayId, relayId.contains(where: { $0 == "{" || $0 == "}" }) {
            throw ValidationError("--relay-id must not contain { or } (its delivery channel is hash-tagged with it)")
        }
        if let udpPort, !(0...65535).contains(udpPort) { throw ValidationError("--udp-port must be 0-65535") }
        guard port != 65535 || udpPort != nil else { throw ValidationError("--port 65535 leaves no room for UDP port + 1: pass --udp-port") }
        guard registrationTTL >= 3 else { throw ValidationError("--registration-ttl must be at least 3 seconds") }
        guard maxFrameSize >= 256 else { throw ValidationError("--max-frame-size must be at least 256") }
        guard (256...65507).contains(maxDatagramSize) else { throw ValidationError("--max-datagram-size must be 256-65507") }
        guard (0...10_000).contains(datagramReadHold) else { throw ValidationError("--datagram-read-hold must be 0-10000 µs") }
        guard pingInterval >= 0.05 else { throw ValidationError("--ping-interval must be at least 0.05 seconds") }
        guard pingMisses >= 1 else { throw ValidationError("--ping-misses must be at least 1") }
        guard inboxMaxMessages >= 1 else { throw ValidationError("--inbox-max-messages must be at least 1") }
        guard inboxTTL >= 1 else { throw ValidationError("--inbox-ttl must be at least 1 second") }
        guard fileStoreRetention >= 1 else { throw ValidationError("--file-store-retention must be at least 1 second") }
        if let metricsPort, !(0...65535).contains(metricsPort) { throw ValidationError("--metrics-port must be 0-65535") }
        guard drainTimeout >= 0 else { throw ValidationError("--drain-timeout must not be negative") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level \(logLevel)") }
        guard LogFormat(rawValue: logFormat) != nil else { throw ValidationError("--log-format must be text or json, got \(logFormat)") }
        do { _ = try RedisEndpoint(parsing: redis) } catch { throw ValidationError("\(error)") }
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel)!
        let format = LogFormat(rawValue: logFormat)!
        LoggingSystem.bootstrap { label in format.makeHandler(label: label, level: level) }
        var configuration = RelayConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.additionalPorts = Array(ports.dropFirst())
        configuration.udpPort = udpPort
        configuration.redisEndpoint = try RedisEndpoint(parsing: redis)
        if let relayId { configuration.relayId = relayId }
        configuration.registrationTTLSeconds = registrationTTL
        configuration.inboxMaxMessages = inboxMaxMessages
        configuration.inboxTTLSeconds = inboxTTL
        configuration.heldFileMaxBytes = fileStoreMaxFileBytes
        configuration.heldFilesMaxBytesPerUser = fileStoreMaxBytesPerUser
        configuration.heldFileRetentionSeconds = fileStoreRetention
        configuration.maxFrameSize = maxFrameSize
        configuration.maxDatagramSize = maxDatagramSize
        configuration.datagramReadHold = .microseconds(Int64(datagramReadHold))
        configuration.heartbeat.interval = .milliseconds(Int64(pingInterval * 1000))
        configuration.heartbeat.missLimit = pingMisses
        configuration.heartbeat.slot = min(configuration.heartbeat.slot, .nanoseconds(configuration.heartbeat.interval.nanoseconds / 8))
        configuration.logger = Logger(label: "simp.relay")
        configuration.drainTimeout = .nanoseconds(Int64(drainTimeout * 1e9))
        configuration.requireLogin = !noLogin
        if let problem = tokenOptions.problem {
            printError("simp-server: \(problem)")
            throw ExitCode.validationFailure
        }
        configuration.accessTokens = tokenOptions.settings
        configuration.passwordLogin = !tokenOptions.noPasswordLogin
        if let tlsCert, let tlsKey { configuration.tls = ControlTLSFiles(certificatePath: tlsCert, keyPath: tlsKey) }
        configuration.messageLimit = RelayCore.Configuration.defaultMessageLimit.scaled(toPerSecond: messageRate)
        configuration.connectionLimit = RelayCore.Configuration.defaultConnectionLimit.scaled(toPerSecond: connectionRate)
        configuration.loginLimit = RelayCore.Configuration.defaultLoginLimit.scaled(toPerSecond: loginRate)
        configuration.maxConnectionsPerHost = maxConnectionsPerHost
        configuration.limits = limitOptions.limits
        configuration.threads = threads
        if let metricsPort {
            let registry = PrometheusCollectorRegistry()
            MetricsSystem.bootstrap(RelayPrometheus.factory(registry: registry))
            configuration.metricsPort = metricsPort
            configuration.metricsRegistry = registry
        }
        OpenFileLimit.raiseToHardLimit()

        let group = ServiceGroup(
            services: [
                RelayShards(
                    configuration: configuration,
                    group: MultiThreadedEventLoopGroup(numberOfThreads: max(threads, System.coreCount)))
            ],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: Logger(label: "simp.lifecycle"))
        do {
            try await group.run()
        } catch  where SocketErrorText.isAddressInUse(error) {
            let held = SocketErrorText.portsInUse(
                host: host,
                ports.map { ("--port", $0, false) } + [
                    ("--udp-port", udpPort ?? port + 1, true), ("--metrics-port", metricsPort ?? 0, false),
                ])
            let which = held.isEmpty ? "a port it needs" : held.joined(separator: " and ")
            printError("simp-server: cannot listen on \(host): \(which) is in use by another process (stop it, or choose another port)")
            throw ExitCode.failure
        } catch let error as RelayStartError where error.unreachableRedis != nil {
            let (address, cause) = error.unreachableRedis!
            printError(
                "simp-server: cannot reach Redis at \(address): \(SocketErrorText.reason(cause)). "
                    + "Not started (exit status 1): start Redis, or pass --redis.")
            throw ExitCode.failure
        } catch {
            printError("simp-server: \(error)")
            throw ExitCode.failure
        }
    }
}
