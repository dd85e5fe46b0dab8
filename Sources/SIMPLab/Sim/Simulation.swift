import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPE2E
import SIMPRelay

/// Runs a scenario in virtual time: the real reliability core (`ReliableSender`,
/// `ReceiverCore`, `RelayCore`, `Heartbeat`, `Backoff`, `MessageCodec`) over simulated links
/// and a modelled TCP. Thousands of messages take well under a second, and a seed always gives
/// the same report.
public enum Simulation {
    /// Virtual time allowed after the last message is sent for every outcome to arrive.
    public static let drainLimit = TimeAmount.minutes(15)
    /// A run whose virtual time stays at one instant for this long (wall clock), through at
    /// least `stallEvents` events, is stalled: something re-arms itself without delay.
    public static let stallWallTime = TimeAmount.seconds(10)
    static let stallEvents = 10_000
    /// The default bound on wall-clock time for a simulated run.
    public static let defaultMaxWallTime = TimeAmount.seconds(120)
    /// Virtual time the run goes on after the last outcome, to catch late duplicates.
    public static let linger = TimeAmount.seconds(5)

    public static func run(_ scenario: Scenario, seed: UInt64? = nil) -> ScenarioReport {
        execute(scenario, seed: seed).report
    }

    /// Runs `scenario` within the bounds of `options`, keeping every message's record.
    public static func execute(_ scenario: Scenario, seed: UInt64? = nil, options: LabOptions = LabOptions()) -> LabRun {
        SimWorld(scenario: scenario, seed: seed ?? scenario.seed, options: options).run()
    }

    /// The default bound on virtual time: the connect grace, the workload, then `drainLimit`.
    public static func defaultMaxVirtualTime(for scenario: Scenario) -> TimeAmount {
        SimWorld.connectGrace + scenario.workload.interval * Int64(scenario.workload.messages) + drainLimit
    }
}

/// Everything in one simulated run.
final class SimWorld {
    let scenario: Scenario
    let seed: UInt64
    private let options: LabOptions
    let queue = EventQueue()
    /// The client defaults (heartbeat, reconnect, connect timeout) the simulated clients use.
    let configuration = ClientConfiguration(serverHost: "sim", serverPort: 0, user: "")
    let relayHeartbeat = RelayConfiguration().heartbeat
    var recorder = RunRecorder()
    private(set) var relay: SimRelay!
    /// The senders and the receivers' devices, which connect before the workload starts.
    private(set) var clients: [SimClient] = []
    /// The receivers' one-shot send-only sessions, which start later.
    var sendOnlyClients: [SimClient] = []
    /// Device stops and starts, and one-shot sessions, still to come.
    var lifecycleEventsDue = 0
    /// The next sequence number of each receiver's one-shot messages (to its one sender).
    var oneShotSequences: [String: Int] = [:]
    /// Every client with what the scenario says of it.
    var lineup: [(member: LabMember, client: SimClient)] = []
    private var clientsByAddress: [SocketAddress: SimClient] = [:]
    private(set) var workloadStart: TimeAmount?
    /// Each device's end-to-end state (identity, prekeys, sessions) by user and device, kept
    /// across its processes (and shared with a one-shot session on it) as `$SIMP_HOME` would
    /// be; in memory, as the simulation touches no files.
    private var keyStores: [String: MemoryStateStore] = [:]
    /// Whether the senders are fetching their receivers' devices before the workload.
    private var openingConversations = false
    var submitted = 0
    private var lastProgress: TimeAmount = .zero
    private(set) var finishedAt: TimeAmount?
    /// While the relay is paused (`Fault.Kind.pauseRelay`): when it goes on. Every packet sent
    /// meanwhile, either way, travels only from then on.
    private var relayPausedUntil: TimeAmount?
    /// The workload starts without the clients that did not connect within this time.
    static let connectGrace = TimeAmount.seconds(30)

    init(scenario: Scenario, seed: UInt64, options: LabOptions) {
        self.scenario = scenario
        self.seed = seed
        self.options = options
    }

    /// Time since the workload started (zero before).
    var elapsed: TimeAmount { workloadStart.map { queue.now - $0 } ?? .zero }

    var isFinished: Bool { finishedAt != nil }

    func run() -> LabRun {
        relay = SimRelay(world: self)
        var stream: UInt64 = 0
        func link(_ conditions: LinkConditions) -> SimLink {
            stream += 1
            return SimLink(
                conditions: conditions, random: SeededRandom(seed: seed, stream: stream), queue: queue,
                heldUntil: { [unowned self] in relayPausedUntil.flatMap { $0 > queue.now ? $0 : nil } }
            ) { [unowned self] in
                workloadStart
            }
        }
        for (index, member) in scenario.members.enumerated() {
            let client = SimClient(
                user: member.user, isSender: member.isSender, device: member.device, sendOnly: member.sendOnly,
                index: index + 1, up: link(member.access.up), down: link(member.access.down), world: self)
            if member.sendOnly { sendOnlyClients.append(client) } else { clients.append(client) }
            lineup.append((member, client))
            clientsByAddress[client.publicAddress] = client
        }
        if let devices = scenario.receiverDevices {
            for user in scenario.receiverUsers { recorder.trackDevices(devices.map(\.name), of: user) }
        }
        relay.start()
        for client in clients { client.start() }
        queue.schedule(after: Self.connectGrace) { [unowned self] in startWorkload() }
        let ended = runQueue()

        var counters = SenderCounters()
        for client in clients + sendOnlyClients where client.isSender || client.sendOnly {
            counters.retransmits += client.sender.retransmits
            counters.spuriousRetransmits += client.sender.spuriousRetransmits
            counters.extraCopies += client.sender.extraCopiesSent
        }
        counters.rateLimited = relay.rejected[.messageRateLimited] ?? 0
        counters.pathSwitches = (clients + sendOnlyClients).reduce(0) { $0 + $1.pathSwitches }
        let duration = workloadStart.map { max(.zero, lastProgress - $0) } ?? .zero
        var run = recorder.run(
            scenario: scenario, mode: .sim, seed: seed, counters: counters, duration: duration, ended: ended,
            endedAt: elapsed)
        run.endToEndDigest = keysDigest()
        return run
    }

    /// A digest of every device's end-to-end keys (identity and prekeys, as the store keeps
    /// them) at the end of the run, devices in name order (`LabRun.endToEndDigest`).
    private func keysDigest() -> UInt64 {
        var digest = PayloadDigest()
        for name in keyStores.keys.sorted() {
            digest.add(Array(name.utf8))
            for entry in ["identity", "prekeys"] { digest.add(keyStores[name]?.load(entry) ?? []) }
        }
        return digest.value
    }

    /// Runs the event queue until the run settles or reaches a bound on virtual or wall time,
    /// reporting progress on the way.
    private func runQueue() -> RunEnd {
        let limit = options.maxVirtualTime ?? Simulation.defaultMaxVirtualTime(for: scenario)
        let clock = ContinuousClock()
        var watch = RunGuard(
            start: clock.now, wallLimit: options.maxWallTime ?? Simulation.defaultMaxWallTime,
            progressInterval: options.progressInterval, eventsPerCheck: Self.eventsPerCheck)
        var stoppedBy = RunEnd.wallTimeLimit
        let outcome = queue.run(
            until: limit, stop: { finishedAt.map { queue.now >= $0 + Simulation.linger } ?? false },
            checkEvery: Self.eventsPerCheck
        ) {
            switch watch.check(virtual: queue.now, wall: clock.now) {
            case .proceed: return true
            case .report:
                options.progress?(recorder.progress(scenario: scenario, clock: elapsed))
                return true
            case .stop(let reason):
                stoppedBy = reason
                return false
            }
        }
        if isFinished { return .settled }
        switch outcome {
        case .interrupted: return stoppedBy
        case .reachedLimit: return .virtualTimeLimit
        case .empty, .stopped: return .idle
        }
    }

    /// Events between two looks at the wall clock.
    private static let eventsPerCheck = 256

    /// The client whose public UDP address is `address`, if any.
    func client(at address: SocketAddress) -> SimClient? { clientsByAddress[address] }

    /// Re-files `client` under its new public address after `change`.
    func addressChanged(of client: SimClient, _ change: () -> Void) {
        clientsByAddress[client.publicAddress] = nil
        change()
        clientsByAddress[client.publicAddress] = client
    }

    /// An outcome or a delivery happened; the run ends once every message is settled.
    func noteProgress() {
        lastProgress = queue.now
        if finishedAt == nil, submitted == scenario.totalMessages, lifecycleEventsDue == 0, recorder.deviceDeliveriesDue == 0,
            clients.allSatisfy({ $0.outstanding == 0 }),
            sendOnlyClients.allSatisfy({ $0.outstanding == 0 })
        {
            finishedAt = queue.now
        }
    }

    /// The end-to-end store of `user`'s `device`.
    func keyStore(user: String, device: String) -> MemoryStateStore {
        let key = user + "/" + device
        if let store = keyStores[key] { return store }
        let store = MemoryStateStore()
        keyStores[key] = store
        return store
    }

    func clientConnected(_ client: SimClient) {
        if workloadStart == nil, !openingConversations, clients.allSatisfy(\.hasConnected) {
            openingConversations = true
            queue.schedule(after: .zero) { [unowned self] in openConversations() } // not inside this client's event
        }
        noteProgress()
    }

    /// Every client is connected (and has published its keys): the senders learn their
    /// receivers' devices (`SimClient.openConversations`), then the workload starts.
    private func openConversations() {
        let senders = clients.filter(\.isSender)
        var opening = senders.count
        for sender in senders {
            sender.openConversations(with: scenario.receiverUsers) { [unowned self] in
                opening -= 1
                if opening == 0 { startWorkload() }
            }
        }
        if senders.isEmpty { startWorkload() }
    }

    private func startWorkload() {
        guard workloadStart == nil else { return }
        workloadStart = queue.now
        let workload = scenario.workload
        let senders = clients.filter(\.isSender)
        let receivers = scenario.receiverUsers
        let stagger = TimeAmount.nanoseconds(workload.interval.nanoseconds / Int64(senders.count))
        for (senderIndex, sender) in senders.enumerated() {
            var sequences = [Int](repeating: 0, count: receivers.count)
            for message in 0..<workload.messages {
                let receiverIndex = (senderIndex + message) % receivers.count
                let text = MessageText.make(sequence: sequences[receiverIndex], payloadBytes: workload.payloadBytes)
                sequences[receiverIndex] += 1
                let to = receivers[receiverIndex]
                queue.schedule(after: workload.interval * Int64(message) + stagger * Int64(senderIndex)) { [unowned self] in
                    submitted += 1
                    sender.submit(text: text, to: to)
                }
            }
        }
        for fault in scenario.faults {
            queue.schedule(after: fault.at) { [unowned self] in apply(fault) }
        }
        scheduleDeviceLifecycles()
    }

    private func apply(_ fault: Fault) {
        switch fault.kind {
        case .closeControl:
            for client in clients where fault.applies(toSender: client.isSender) {
                if let connection = client.control { relay.closeConnection(connection) }
            }
        case .restartRelay:
            relay.restart(downtime: fault.downtime)
        case .restartRedis:
            relay.restartRedis(downtime: fault.downtime)
        case .natRebind:
            for client in clients where fault.applies(toSender: client.isSender) { client.rebind() }
        case .pauseRelay:
            relayPausedUntil = queue.now + fault.downtime
        }
    }
}
