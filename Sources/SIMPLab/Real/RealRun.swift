import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SIMPClient
import SIMPCore
import SIMPLocalServers
import SIMPRedis
import SIMPRelay

/// Runs a scenario with real sockets: a `BackgroundRelay` next to a private `redis-server`, one
/// `SIMPClient` per sender and receiver, each behind a `LinkProxy` (its datagrams, both ways,
/// through the link model) and a `ControlProxy` (so its TCP connection can be cut). Faults
/// restart the real relay and the real Redis. TCP itself is not impaired in this mode.
public enum RealRun {
    /// Wall-clock time allowed after the last message is sent for every outcome to arrive.
    public static let drainLimit = TimeAmount.seconds(120)
    /// Wall-clock time allowed after every message has its outcome for the receiving devices to
    /// get what is still due to them (a device that came back receives its backlog).
    public static let deviceDrainLimit = TimeAmount.seconds(30)
    /// Time waited after the last outcome for late deliveries and duplicates.
    public static let linger = TimeAmount.milliseconds(300)

    public static func run(_ scenario: Scenario, seed: UInt64? = nil) async throws -> ScenarioReport {
        try await execute(scenario, seed: seed).report
    }

    /// Runs `scenario`, keeping every message's record; `options` bounds the wait for outcomes
    /// and receives progress.
    public static func execute(_ scenario: Scenario, seed: UInt64? = nil, options: LabOptions = LabOptions()) async throws -> LabRun {
        let world = try await RealWorld.start(scenario, seed: seed ?? scenario.seed, options: options)
        do {
            let run = try await world.execute()
            await world.stop()
            return run
        } catch {
            await world.stop()
            throw error
        }
    }
}

/// The processes, proxies and clients of one real-mode run.
/// Sendable: `relay` and `participants` are changed only by the run's own task (start, faults,
/// stop); the tasks it starts read the participants only after start and share only the locked boxes.
final class RealWorld: @unchecked Sendable {
    /// One client of the run with its proxies; a device that goes offline and comes back, or a
    /// one-shot session, has one process (`SIMPClient`) after another behind the same proxies.
    final class Participant: Sendable {
        let member: LabMember
        /// The user name the relay sees (the member's, with the seed).
        let name: String
        let path: LinkProxy
        let control: ControlProxy
        private let current = NIOLockedValueBox<SIMPClient?>(nil)

        init(member: LabMember, name: String, path: LinkProxy, control: ControlProxy) {
            self.member = member
            self.name = name
            self.path = path
            self.control = control
        }

        var isSender: Bool { member.isSender }
        /// The running process, if any.
        var client: SIMPClient? {
            get { current.withLockedValue { $0 } }
            set { current.withLockedValue { $0 = newValue } }
        }
    }

    let scenario: Scenario
    let seed: UInt64
    private let options: LabOptions
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    /// The relay's own loop, so that `pauseRelay` can stop it without stopping the clients.
    private let relayGroup: MultiThreadedEventLoopGroup
    private let redis: LocalRedisServer
    private var relay: BackgroundRelay
    private let relayConfiguration: RelayConfiguration
    private(set) var participants: [Participant] = []
    /// The tasks collecting what each process's application receives.
    private let inboxes = NIOLockedValueBox([Task<Void, Never>]())
    /// `$SIMP_HOME` of every client: each device's end-to-end keys and sessions, kept across
    /// its processes (removed when the run stops).
    private let endToEndHome = FileManager.default.temporaryDirectory.appendingPathComponent("simp-lab-e2e-\(UUID().uuidString)")
    let recorder = NIOLockedValueBox(RunRecorder())
    let lastProgress = NIOLockedValueBox(NIODeadline.now())
    /// When the workload started: the recorder's times count from here.
    let workloadStart = NIOLockedValueBox(NIODeadline.now())
    /// Messages the relay stored for a receiver that was offline (e.g. during a relay restart),
    /// with when they were sent: they count when the relay reports them delivered.
    private let storedSince = NIOLockedValueBox([UInt64: NIODeadline]())
    /// The next sequence number of each receiver's one-shot messages.
    let oneShotSequences = NIOLockedValueBox([String: Int]())

    private init(
        scenario: Scenario, seed: UInt64, options: LabOptions, redis: LocalRedisServer, relay: BackgroundRelay,
        relayGroup: MultiThreadedEventLoopGroup, configuration: RelayConfiguration
    ) {
        self.relayGroup = relayGroup
        self.scenario = scenario
        self.seed = seed
        self.options = options
        self.redis = redis
        self.relay = relay
        self.relayConfiguration = configuration
    }

    static func start(_ scenario: Scenario, seed: UInt64, options: LabOptions) async throws -> RealWorld {
        let redis = try await LocalRedisServer.start()
        var configuration = RelayConfiguration.lab(redis: redis, clients: scenario.members.count)
        let relay: BackgroundRelay
        let relayGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do { relay = try await BackgroundRelay.start(configuration: configuration, group: relayGroup) } catch {
            await redis.stop()
            try? await relayGroup.shutdownGracefully()
            throw error
        }
        // A restarted relay must come back on the same ports.
        configuration.port = relay.controlAddress!.port!
        configuration.udpPort = relay.datagramAddress!.port!
        let world = RealWorld(
            scenario: scenario, seed: seed, options: options, redis: redis, relay: relay, relayGroup: relayGroup,
            configuration: configuration)
        do { try await world.connectClients() } catch {
            await world.stop()
            throw error
        }
        return world
    }

    static func quietLogger(_ label: String) -> Logger {
        var logger = Logger(label: label)
        logger.logLevel = .critical
        return logger
    }

    private func connectClients() async throws {
        for (index, member) in scenario.members.enumerated() {
            let path = try await LinkProxy.start(
                up: member.access.up, down: member.access.down, seed: seed,
                stream: UInt64(2 * index + 1), relay: relay.datagramAddress!, group: group)
            let control = try await ControlProxy.start(target: relay.controlAddress!, group: group)
            participants.append(Participant(member: member, name: member.user + "-\(seed)", path: path, control: control))
        }
        if let devices = scenario.receiverDevices {
            recorder.withLockedValue { recorder in
                for user in scenario.receiverUsers { recorder.trackDevices(devices.map(\.name), of: user + "-\(seed)") }
            }
        }
        for participant in participants where !participant.member.sendOnly { try await startProcess(of: participant) }
    }

    /// Starts a new client process for `participant` behind its proxies and waits until it is
    /// registered; what its application receives is recorded.
    func startProcess(of participant: Participant) async throws {
        var configuration = ClientConfiguration.lab(
            user: participant.name, controlPort: participant.control.port, behind: participant.path, endToEndHome: endToEndHome)
        configuration.retransmit = scenario.policy
        configuration.device = participant.member.device
        configuration.sendOnly = participant.member.sendOnly
        let client = SIMPClient(configuration: configuration)
        participant.client = client
        let inbox = collect(client, as: participant.name, device: participant.member.device)
        inboxes.withLockedValue { $0.append(inbox) }
        try await client.connect()
        try await participant.path.setClient(client.localDatagramAddress!)
    }

    /// Records every message the application of `client` receives, and each it could not decrypt.
    private func collect(_ client: SIMPClient, as name: String, device: String) -> Task<Void, Never> {
        let notices = Task { [recorder] in
            for await notice in client.endToEndNotices {
                if case .undecryptable = notice { recorder.withLockedValue { $0.decryptionFailed() } }
            }
        }
        let paths = Task { [recorder, workloadStart] in
            for await path in client.datagramPaths {
                let at = NIODeadline.now() - workloadStart.withLockedValue { $0 }
                recorder.withLockedValue { $0.pathChanged(toControl: path == .control, at: at) }
            }
        }
        inboxes.withLockedValue { $0 += [notices, paths] }
        return Task { [recorder, lastProgress, workloadStart] in
            for await message in client.messages {
                let at = NIODeadline.now() - workloadStart.withLockedValue { $0 }
                recorder.withLockedValue {
                    $0.handedOver(endToEnd: message.isEndToEnd)
                    $0.appReceived(from: message.fromUser, to: name, device: device, text: message.content, at: at)
                }
                lastProgress.withLockedValue { $0 = .now() }
            }
        }
    }

    func execute() async throws -> LabRun {
        let start = NIODeadline.now()
        workloadStart.withLockedValue { $0 = start }
        let sampler = sampleProgress(start: start)
        for participant in participants { try await participant.path.startClock(at: start) }
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            let senders = participants.filter(\.isSender)
            let receivers = scenario.receiverUsers.map { $0 + "-\(seed)" }
            for (index, sender) in senders.enumerated() {
                tasks.addTask {
                    try await self.send(
                        from: sender.client!, named: sender.name, index: index, senderCount: senders.count, to: receivers, start: start)
                }
            }
            addDeviceLifecycles(to: &tasks, start: start)
            for fault in scenario.faults {
                tasks.addTask {
                    try await Self.sleep(until: start + fault.at)
                    try await self.apply(fault)
                }
            }
            try await tasks.waitForAll()
        }
        let drainEnd = NIODeadline.now() + RealRun.drainLimit
        let deadline = options.maxWallTime.map { min(drainEnd, start + $0) } ?? drainEnd
        func settled() -> Bool { recorder.withLockedValue { $0.unresolved == 0 && $0.deviceDeliveriesDue == 0 } }
        var devicesDeadline: NIODeadline?
        while !settled(), NIODeadline.now() < min(deadline, devicesDeadline ?? deadline) {
            if devicesDeadline == nil, recorder.withLockedValue({ $0.unresolved }) == 0 {
                devicesDeadline = .now() + RealRun.deviceDrainLimit
            }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        let ended: RunEnd = settled() ? .settled : .wallTimeLimit
        try await Task.sleep(nanoseconds: UInt64(RealRun.linger.nanoseconds))
        sampler.cancel()
        var counters = try await senderCounters()
        counters.rateLimited = (try? await relay.statistics().rejected[.messageRateLimited]) ?? 0
        recordRetransmissions(upTo: counters.retransmits, at: NIODeadline.now() - start)
        let duration = lastProgress.withLockedValue { $0 } - start
        var run = recorder.withLockedValue {
            $0.run(
                scenario: scenario, mode: .real, seed: seed, counters: counters, duration: max(.zero, duration), ended: ended,
                endedAt: NIODeadline.now() - start)
        }
        run.timelineResolutionMs = Double(options.progressInterval.nanoseconds) / 1e6
        return run
    }

    /// The senders' retransmission counters (one-shot sessions' too), summed; every client's
    /// path switches. A one-shot session's client is closed by now: it reports its final
    /// counters.
    private func senderCounters() async throws -> SenderCounters {
        var counters = SenderCounters()
        for participant in participants {
            guard let statistics = try await participant.client?.statistics() else { continue }
            counters.pathSwitches += statistics.pathSwitches
            guard participant.isSender || participant.member.sendOnly else { continue }
            counters.retransmits += statistics.retransmits
            counters.spuriousRetransmits += statistics.spuriousRetransmits
            counters.extraCopies += statistics.extraCopies
        }
        return counters
    }

    /// Retransmissions already passed to the recorder's timeline.
    private let retransmitsRecorded = NIOLockedValueBox(0)

    private func recordRetransmissions(upTo total: Int, at time: TimeAmount) {
        let new = retransmitsRecorded.withLockedValue { recorded in
            defer { recorded = max(recorded, total) }
            return total - recorded
        }
        recorder.withLockedValue { $0.retransmitted(new, at: time) }
    }

    /// Samples the senders' retransmission counters for the timeline and reports progress,
    /// every `progressInterval` until cancelled.
    private func sampleProgress(start: NIODeadline) -> Task<Void, Never> {
        Task {
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: UInt64(options.progressInterval.nanoseconds))
                guard !Task.isCancelled, let counters = try? await senderCounters() else { return }
                let now = NIODeadline.now() - start
                recordRetransmissions(upTo: counters.retransmits, at: now)
                if let progress = options.progress {
                    progress(recorder.withLockedValue { $0.progress(scenario: scenario, clock: now) })
                }
            }
        }
    }

    /// Counts stored messages when the relay reports them delivered from the inbox (or discarded).
    func followStoredMessages(of client: SIMPClient) -> Task<Void, Never> {
        Task { [recorder, lastProgress, storedSince, workloadStart] in
            for await notice in client.notices {
                switch notice {
                case .delivered(let id, _):
                    guard let sent = storedSince.withLockedValue({ $0.removeValue(forKey: id) }) else { continue }
                    let at = NIODeadline.now() - workloadStart.withLockedValue { $0 }
                    recorder.withLockedValue { $0.receiptArrived(id: id, latency: .now() - sent, attempts: nil, at: at) }
                case .discarded(let id, _, _, _):
                    guard storedSince.withLockedValue({ $0.removeValue(forKey: id) }) != nil else { continue }
                    let at = NIODeadline.now() - workloadStart.withLockedValue { $0 }
                    recorder.withLockedValue { $0.messageFailed(id: id, at: at) }
                default:
                    continue
                }
                lastProgress.withLockedValue { $0 = .now() }
            }
        }
    }

    /// One sender's share of the workload, on schedule.
    private func send(from client: SIMPClient, named sender: String, index: Int, senderCount: Int, to receivers: [String], start: NIODeadline)
        async throws
    {
        _ = followStoredMessages(of: client) // ends when the client closes
        let workload = scenario.workload
        let stagger = TimeAmount.nanoseconds(workload.interval.nanoseconds * Int64(index) / Int64(senderCount))
        var sequences = [Int](repeating: 0, count: receivers.count)
        for message in 0..<workload.messages {
            let receiverIndex = (index + message) % receivers.count
            let text = MessageText.make(sequence: sequences[receiverIndex], payloadBytes: workload.payloadBytes)
            sequences[receiverIndex] += 1
            try await Self.sleep(until: start + workload.interval * Int64(message) + stagger)
            _ = try await submit(text, from: client, named: sender, to: receivers[receiverIndex], start: start)
        }
    }

    /// Submits one message and records it and its outcome; returns its id.
    func submit(_ text: String, from client: SIMPClient, named sender: String, to receiver: String, start: NIODeadline) async throws -> UInt64 {
        let (id, result) = try await client.submit(SIMPMessage(kind: .text, toUser: receiver, content: text))
        let sentAt = NIODeadline.now()
        recorder.withLockedValue { $0.messageSent(id: id, from: sender, to: receiver, text: text, at: sentAt - start) }
        result.whenSuccess { [recorder, lastProgress, storedSince] outcome in
            let at = NIODeadline.now() - start
            recorder.withLockedValue { recorder in
                switch outcome {
                case .delivered(_, let latency, let attempts): recorder.receiptArrived(id: id, latency: latency, attempts: attempts, at: at)
                case .failed(_, let failure): recorder.messageFailed(id: id, attempts: failure.attempts, at: at)
                case .connectionLost: recorder.messageFailed(id: id, connectionLost: true, at: at)
                case .stored(let id, _): storedSince.withLockedValue { $0[id] = sentAt } // counted once delivered
                }
            }
            lastProgress.withLockedValue { $0 = .now() }
        }
        return id
    }

    private func apply(_ fault: Fault) async throws {
        switch fault.kind {
        case .closeControl:
            for participant in participants where fault.applies(toSender: participant.isSender) { await participant.control.cut() }
        case .restartRelay:
            await relay.shutdown()
            try await Task.sleep(nanoseconds: UInt64(fault.downtime.nanoseconds))
            relay = try await BackgroundRelay.start(configuration: relayConfiguration, group: relayGroup)
        case .restartRedis:
            await redis.stop()
            try await Task.sleep(nanoseconds: UInt64(fault.downtime.nanoseconds))
            try await redis.relaunch()
        case .natRebind:
            for participant in participants where fault.applies(toSender: participant.isSender) { try await participant.path.rebind() }
        case .pauseRelay:
            // The relay's only thread does nothing else meanwhile; the kernel queues its input.
            let pause = UInt32(fault.downtime.nanoseconds / 1000)
            relayGroup.next().execute { usleep(pause) }
        }
    }

    func stop() async {
        for participant in participants { await participant.client?.close() }
        for inbox in inboxes.withLockedValue({ $0 }) { await inbox.value }
        for participant in participants {
            await participant.control.stop()
            await participant.path.stop()
        }
        await relay.shutdown()
        await redis.stop()
        try? await group.shutdownGracefully()
        try? await relayGroup.shutdownGracefully()
        try? FileManager.default.removeItem(at: endToEndHome)
    }

    static func sleep(until deadline: NIODeadline) async throws {
        let wait = deadline - .now()
        if wait > .zero { try await Task.sleep(nanoseconds: UInt64(wait.nanoseconds)) }
    }
}

extension ClientConfiguration {
    /// A lab client: its datagrams through `path` both ways, end to end with its keys under
    /// `endToEndHome`, its control connection to `controlPort` on loopback, quiet.
    static func lab(user: String, controlPort: Int, behind path: LinkProxy, endToEndHome: URL) -> ClientConfiguration {
        var configuration = ClientConfiguration(serverHost: "127.0.0.1", serverPort: controlPort, user: user)
        configuration.localHost = "127.0.0.1"
        configuration.datagramTarget = path.clientSideAddress
        configuration.advertisedUDPPort = path.publicPort
        configuration.logger = RealWorld.quietLogger("lab.client")
        configuration.endToEnd = EndToEndSettings(home: endToEndHome)
        return configuration
    }
}

extension RelayConfiguration {
    /// The lab's relay: free ports, `redis`, loaded for `clients` clients on loopback, quiet.
    static func lab(redis: LocalRedisServer, clients: Int) -> RelayConfiguration {
        var configuration = RelayConfiguration()
        configuration.port = 0
        configuration.udpPort = 0
        configuration.redis = redis.url
        configuration.relayId = "lab-relay"
        // Development mode: the lab's Redis is restarted empty in some scenarios, which would
        // lose credentials. Datagrams are sealed and checked exactly as with login.
        configuration.requireLogin = false
        configuration.logger = RealWorld.quietLogger("lab.relay")
        configuration.allowLoad(ofClients: clients)
        return configuration
    }

    /// Raises the per-address limits so that `clients` clients on one address (loopback) can
    /// all log in at once, and again after a fault, without tripping the relay's abuse limits.
    mutating func allowLoad(ofClients clients: Int) {
        let logins = RateLimit(perSecond: max(loginLimit.perSecond, Double(2 * clients)), burst: max(loginLimit.burst, 4 * clients))
        loginLimit = logins
        connectionLimit = RateLimit(
            perSecond: max(connectionLimit.perSecond, logins.perSecond),
            burst: max(connectionLimit.burst, logins.burst))
        maxConnectionsPerHost = max(maxConnectionsPerHost, 4 * clients)
        limits.maxUnauthenticatedPerHost = max(limits.maxUnauthenticatedPerHost, 4 * clients)
        // The lab measures delivery, not abuse: its clients' control requests are not budgeted.
        for kind in ControlRequestKind.allCases { limits.budgets[kind] = RateLimit(perSecond: 1e6, burst: 1_000_000) }
        limits.prekeyClaims = RateLimit(perSecond: 1e6, burst: 1_000_000)
        limits.maxRequestsInFlight = 1_000_000
    }
}
