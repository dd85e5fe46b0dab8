import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SIMPCore
import SIMPRelay

/// Where a set of idle sessions connects, and from where.
public struct IdleSessionPlan: Sendable {
    /// Relays' control addresses. Session `n` starts at relay `n mod count`; when its relay
    /// cannot be reached it tries the next one, as a client given several relays would.
    public var relays: [HostPort]
    /// Local addresses to connect from (session `n` uses `n mod count`), e.g. 127.0.0.2 …
    /// 127.0.0.9, so one machine is not held to one address's ephemeral ports.
    public var sourceHosts: [String]
    /// The first session's number and how many there are: users `<prefix>-idle-<n>`.
    public var first = 0
    public var count: Int
    public var prefix: String
    /// How a dropped session comes back: the reference client's schedule (jittered backoff).
    public var reconnect = ReconnectPolicy()
    /// Whether a session that cannot reach its relay tries the next one (false: it keeps
    /// trying its own, as a client given one relay does).
    public var failover = true
    /// Whether each session keeps alive as an idle reference client does: a sealed HELLO
    /// datagram every `ClientSession.defaultKeepaliveInterval` (25 s), which the relay opens
    /// and answers, and a PING frame every `HeartbeatPolicy.client.interval` (110 s), which it
    /// answers (false: the sessions only answer the relay's PINGs).
    public var referenceKeepalive = false

    public init(relays: [HostPort], sourceHosts: [String] = ["127.0.0.1"], first: Int = 0, count: Int, prefix: String) {
        self.relays = relays
        self.sourceHosts = sourceHosts
        self.first = first
        self.count = count
        self.prefix = prefix
    }

    /// The relay every session starts on (nil: session n starts on relay n mod count), as
    /// `--restart-relay` and `--kill-relay` want: one relay holding them all.
    public var home: Int?

    /// The relay session `number` tries after `failures` failed attempts in a row.
    func relay(of number: Int, afterFailures failures: Int) -> HostPort {
        let failures = failover ? failures : 0
        guard let home else { return relays[(number + failures) % relays.count] }
        guard failures > 0, relays.count > 1 else { return relays[home] }
        // Away from home, the sessions spread over the other relays.
        return relays[(home + 1 + (number + failures - 1) % (relays.count - 1)) % relays.count]
    }
    /// Sessions that start on relay `index`.
    public func sessions(onRelay index: Int) -> Int {
        if let home { return index == home ? count : 0 }
        return (first..<(first + count)).reduce(0) { $0 + ($1 % relays.count == index ? 1 : 0) }
    }
    /// The local address session `number` connects from.
    func sourceHost(of number: Int) -> String { sourceHosts[number % sourceHosts.count] }
}

/// A relay's control address.
public struct HostPort: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }
    public var description: String { "\(host):\(port)" }
}

/// Many registered users that do nothing but answer PING: the `--sessions` load on a relay's
/// memory. Those from one source address share one UDP socket (a registration needs a port, not
/// a socket of its own). A session whose connection drops comes back as the reference client
/// does (`Backoff`, jittered), so a restarted or killed relay sees its users return.
/// Sendable: `udpPorts` is filled by `connect()` before any session starts; the rest of the
/// mutable state is touched on `loop` only.
public final class IdleSessions: @unchecked Sendable {
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let loop: EventLoop
    private let plan: IdleSessionPlan
    /// One datagram port per source address.
    private var udpPorts: [String: Int] = [:]
    private var datagrams: [Channel] = []
    /// The datagram socket of each source address.
    private var datagramChannels: [String: Channel] = [:]
    private var sessions: [IdleSession] = []
    private var closing = false
    private let connectedCount = NIOLockedValueBox(0)

    /// One idle user: its connection (nil while away) and reconnect schedule. Touched only on
    /// `loop`, like the rest of the state here.
    private final class IdleSession: @unchecked Sendable {
        let number: Int
        var channel: Channel?
        /// The keepalives of the connection (`referenceKeepalive`), cancelled when it closes.
        var keepalives: [RepeatedTask] = []
        var backoff: Backoff
        /// Failed attempts since it was last connected (which relay to try next).
        var failures = 0
        init(number: Int, policy: ReconnectPolicy) {
            self.number = number
            backoff = Backoff(policy: policy)
        }
    }

    public init(plan: IdleSessionPlan) {
        precondition(!plan.relays.isEmpty && !plan.sourceHosts.isEmpty)
        self.plan = plan
        loop = group.next()
    }

    /// Sessions registered right now.
    public var connected: Int { connectedCount.withLockedValue { $0 } }

    /// Registers every session, `concurrency` at a time; throws if one cannot register at first.
    /// Returns how many are connected.
    public func connect(concurrency: Int = 128) async throws -> Int {
        let loop = self.loop
        for host in plan.sourceHosts where udpPorts[host] == nil {
            let udp = try await loop.flatSubmit {
                BenchConnector.bindDatagramSocket(host: host, handler: DiscardDatagramHandler(), on: loop)
            }.get()
            datagrams.append(udp)
            datagramChannels[host] = udp
            udpPorts[host] = udp.localAddress!.port!
        }
        var next = plan.first
        let end = plan.first + plan.count
        while next < end {
            let batch = next..<min(end, next + concurrency)
            next = batch.upperBound
            let started = batch.map { IdleSession(number: $0, policy: plan.reconnect) }
            sessions += started
            try await loop.flatSubmit {
                EventLoopFuture.andAllSucceed(started.map { self.start($0) }, on: loop)
            }.get()
        }
        return connected
    }

    /// Opens `session`'s connection to the relay it is due to try; on the loop.
    private func start(_ session: IdleSession) -> EventLoopFuture<Void> {
        let relay = plan.relay(of: session.number, afterFailures: session.failures)
        let host = plan.sourceHost(of: session.number)
        let source = try? SocketAddress(ipAddress: host, port: 0)
        return BenchConnector.register(
            user: "\(plan.prefix)-idle-\(session.number)", udpPort: udpPorts[host]!, host: relay.host, port: relay.port,
            source: source, handler: BenchControlHandler(), on: loop
        ).map { registered in
            session.channel = registered.control
            session.failures = 0
            session.backoff.reset()
            self.connectedCount.withLockedValue { $0 += 1 }
            if self.plan.referenceKeepalive { self.keepAlive(session, registered, datagrams: self.datagramChannels[host]!) }
            registered.control.closeFuture.whenComplete { _ in
                for task in session.keepalives { task.cancel() }
                session.keepalives = []
                session.channel = nil
                self.connectedCount.withLockedValue { $0 -= 1 }
                self.scheduleReconnect(session)
            }
        }
    }

    /// Sends `registered`'s keepalives as an idle reference client does, each first at a random
    /// point of its interval (the sessions connected within seconds; real ones did not): a
    /// sealed HELLO over UDP from `datagrams`, and a PING on the control connection.
    private func keepAlive(_ session: IdleSession, _ registered: BenchSession, datagrams: Channel) {
        let sealer = NIOLoopBoundBox(DatagramSealer(keys: registered.keys, direction: .uplink), eventLoop: loop)
        let hello = SIMPMessage(kind: .hello, fromUser: registered.user)
        let address = registered.relayDatagramAddress, control = registered.control, user = registered.user
        let udp = ClientSession.defaultKeepaliveInterval, tcp = HeartbeatPolicy.client.interval
        session.keepalives = [
            loop.scheduleRepeatedTask(initialDelay: .nanoseconds(Int64.random(in: 0..<udp.nanoseconds)), delay: udp) { _ in
                datagrams.writeAndFlush(AddressedEnvelope(remoteAddress: address, data: sealer.value.seal(hello)), promise: nil)
            },
            loop.scheduleRepeatedTask(initialDelay: .nanoseconds(Int64.random(in: 0..<tcp.nanoseconds)), delay: tcp) { _ in
                control.writeAndFlush(SIMPMessage(kind: .ping, fromUser: user), promise: nil)
            },
        ]
    }

    /// Comes back after the session's next backoff delay, trying the next relay if this fails.
    private func scheduleReconnect(_ session: IdleSession) {
        guard !closing else { return }
        let delay = session.backoff.next(random: Double.random(in: 0..<1)).delay
        loop.scheduleTask(in: delay) {
            guard !self.closing else { return }
            self.start(session).whenFailure { _ in
                session.failures += 1
                self.scheduleReconnect(session)
            }
        }
    }

    /// Disconnects every session (none comes back).
    public func close() async {
        let open = try? await loop.submit {
            self.closing = true
            return self.sessions.compactMap(\.channel)
        }.get()
        for channel in open ?? [] { channel.close(promise: nil) }
        for channel in datagrams { try? await channel.close() }
        try? await group.shutdownGracefully()
    }
}

extension IdleSessions {
    /// What `simp-bench hold-sessions` does: registers `plan`'s sessions and keeps them,
    /// reporting `connected N` through `report` whenever the count changes (looked at every
    /// 50 ms), until the process that started it is gone. A session that cannot register at
    /// first is reported as `error …` and ends the hold.
    public static func hold(_ plan: IdleSessionPlan, report: @escaping @Sendable (String) -> Void) async {
        OpenFileLimit.raiseToHardLimit()
        let parent = getppid()
        let sessions = IdleSessions(plan: plan)
        var reported = -1
        do {
            _ = try await sessions.connect()
            while getppid() == parent {
                let now = sessions.connected
                if now != reported {
                    report("connected \(now)")
                    reported = now
                }
                try await Task.sleep(nanoseconds: 50_000_000)
            }
        } catch {
            report("error \(error)")
        }
        await sessions.close()
    }
}
