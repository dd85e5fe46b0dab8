import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A Redis Cluster client: commands routed by key slot to the master serving it, over one
/// `RedisClient` connection per node on the client's event loop.
///
/// - The slot map comes from `CLUSTER SLOTS`, asked of the known masters then the seeds.
/// - A pipeline is split by node (one round trip per node, in parallel) and its replies are put
///   back in command order. `MULTI`…`EXEC` blocks go to one node whole; a command without a key
///   (e.g. `SCRIPT LOAD`) goes with the keyed command after it (or, failing that, before it).
/// - `MOVED` refreshes the slot map and resends to the named node; `ASK` resends there behind
///   `ASKING`; `TRYAGAIN`, `CLUSTERDOWN` and unreachable nodes (a master just killed) are retried
///   with a fresh map and a short backoff for up to `retryWindow`, which covers a failover.
///   A command retried after its connection broke may have run twice (as with any client).
public final class RedisClusterClient: RedisCommands {
    /// Where to start discovering (login and TLS of the first apply to every node).
    public let seeds: [RedisURL]
    public let eventLoop: EventLoop
    private let timeout: TimeAmount
    private let retryWindow: TimeAmount
    private let logger: Logger
    private let state: NIOLoopBoundBox<State>
    private let roundTripCount = NIOLockedValueBox<Int>(0)

    private struct State {
        var map: ClusterSlotMap?
        var refreshing: EventLoopFuture<ClusterSlotMap>?
        var nodes: [String: RedisClient] = [:]
        var closed = false
    }

    /// A group of commands that must go to one node: one command, or a `MULTI`…`EXEC` block.
    private struct Unit {
        var indices: Range<Int>
        var slot: Int?
    }

    /// Where a unit goes next.
    private enum Target: Equatable {
        case slotOwner
        case node(ClusterNode, asking: Bool)
    }

    /// - Parameters:
    ///   - seeds: one or more nodes of the cluster (`redis://` or `rediss://`, database 0).
    ///   - timeout: limit for connecting and for each reply, per node.
    ///   - retryWindow: how long redirections and failovers are retried before a call fails.
    public init(
        seeds: [RedisURL], timeout: TimeAmount = .seconds(2), retryWindow: TimeAmount = .seconds(6),
        logger: Logger = Logger(label: "simp.redis.cluster"),
        eventLoop: EventLoop = MultiThreadedEventLoopGroup.singleton.next()
    ) {
        precondition(!seeds.isEmpty, "a Redis Cluster client needs at least one seed node")
        self.seeds = seeds
        self.timeout = timeout
        self.retryWindow = retryWindow
        self.logger = logger
        self.eventLoop = eventLoop
        self.state = .makeBoxSendingValue(State(), eventLoop: eventLoop)
    }

    /// Round trips made so far (a pipeline counts once per node it went to).
    public var roundTrips: Int { roundTripCount.withLockedValue { $0 } }

    /// A cluster.
    public var isCluster: Bool { true }

    /// A client for each master, from a slot map asked for now (a scan must not miss a master
    /// promoted since the last redirection); connections are shared with routed commands.
    public func masters() -> EventLoopFuture<[any RedisCommands]> {
        eventLoop.flatSubmit {
            self.refresh().map { map in map.masters.map { self.client(for: $0) } }
        }
    }

    public func pipeline(bytes commands: [[[UInt8]]], on eventLoop: EventLoop) -> EventLoopFuture<[RedisValue]> {
        self.eventLoop.run(answeringOn: eventLoop) { self.run(commands) }
    }

    /// Runs a command without keys on every master (e.g. `SCAN`, `DBSIZE`); replies per master.
    public func onEveryMaster(_ command: [String]) -> EventLoopFuture<[RedisValue]> {
        eventLoop.flatSubmit {
            self.slotMap().flatMap { map in
                let replies = map.masters.map { self.client(for: $0).command(command, on: self.eventLoop) }
                return EventLoopFuture.whenAllSucceed(replies, on: self.eventLoop)
            }
        }
    }

    /// The URL of the master serving `key`'s slot now (for a `RedisSubscriber` on that node).
    public func masterURL(forKey key: String) -> EventLoopFuture<RedisURL> {
        eventLoop.flatSubmit {
            self.slotMap().flatMapThrowing { map in
                guard let node = map.owner(of: RedisKeySlot.slot(of: key)) else {
                    throw RedisError("no Redis Cluster node serves the slot of \(key)")
                }
                return self.seeds[0].node(host: node.host, port: node.port)
            }
        }
    }

    /// Forgets the slot map and asks the cluster again.
    public func refreshSlots() -> EventLoopFuture<Void> {
        eventLoop.flatSubmit { self.refresh().map { _ in } }
    }

    public func shutdown() async {
        let nodes = try? await eventLoop.submit { () -> [RedisClient] in
            self.state.value.closed = true
            return Array(self.state.value.nodes.values)
        }.get()
        for node in nodes ?? [] { await node.shutdown() }
    }

    // MARK: On the event loop

    private func run(_ commands: [[[UInt8]]]) -> EventLoopFuture<[RedisValue]> {
        guard !state.value.closed else { return eventLoop.makeFailedFuture(RedisError("Redis Cluster client is shut down")) }
        let units = Self.units(of: commands)
        let deadline = NIODeadline.now() + retryWindow
        return send(units, targets: units.map { _ in .slotOwner }, commands: commands, attempt: 0, deadline: deadline).map { done in
            var replies = [RedisValue](repeating: .null, count: commands.count)
            for (unit, values) in done {
                for (index, value) in zip(unit.indices, values) { replies[index] = value }
            }
            return replies
        }
    }

    /// Sends units to their nodes and returns each unit with its replies, sending the redirected
    /// or failed ones again until `deadline`.
    private func send(
        _ units: [Unit], targets: [Target], commands: [[[UInt8]]], attempt: Int,
        deadline: NIODeadline
    ) -> EventLoopFuture<[(Unit, [RedisValue])]> {
        slotMap().flatMap { map in
            var byNode: [ClusterNode: [Int]] = [:]
            for (position, unit) in units.enumerated() {
                byNode[self.node(for: unit, target: targets[position], in: map), default: []].append(position)
            }
            let sent = byNode.map { node, positions in
                var batch: [[[UInt8]]] = []
                for position in positions {
                    if case .node(_, asking: true) = targets[position] { batch.append([Array("ASKING".utf8)]) }
                    batch += units[position].indices.map { commands[$0] }
                }
                self.roundTripCount.withLockedValue { $0 += 1 }
                return self.client(for: node).pipeline(bytes: batch, on: self.eventLoop)
                    .map { Result<[RedisValue], Error>.success($0) }
                    .recover { Result.failure($0) }
                    .map { (positions, $0) }
            }
            return EventLoopFuture.whenAllSucceed(sent, on: self.eventLoop).flatMap { results in
                self.sort(results, units: units, targets: targets, commands: commands, attempt: attempt, deadline: deadline)
            }
        }
    }

    /// Keeps the finished units and sends the others again (after a map refresh and a pause
    /// when the cluster is changing).
    private func sort(
        _ results: [([Int], Result<[RedisValue], Error>)], units: [Unit], targets: [Target],
        commands: [[[UInt8]]], attempt: Int, deadline: NIODeadline
    ) -> EventLoopFuture<[(Unit, [RedisValue])]> {
        let late = NIODeadline.now() >= deadline
        var done: [(Unit, [RedisValue])] = []
        var again: [(Unit, Target)] = []
        var needsRefresh = false
        var lastError: Error?
        for (positions, result) in results {
            guard case .success(var replies) = result else {
                if case .failure(let error) = result { lastError = error }
                needsRefresh = true
                again += positions.map { (units[$0], .slotOwner) }
                continue
            }
            for position in positions {
                let unit = units[position]
                if case .node(_, asking: true) = targets[position] { replies.removeFirst() }
                let values = Array(replies.prefix(unit.indices.count))
                replies.removeFirst(values.count)
                if let redirect = Self.redirection(in: values), !late {
                    needsRefresh = needsRefresh || redirect.refresh
                    again.append((unit, redirect.target))
                } else {
                    done.append((unit, values))
                }
            }
        }
        if again.isEmpty { return eventLoop.makeSucceededFuture(done) }
        if late { return eventLoop.makeFailedFuture(lastError ?? RedisError("Redis Cluster did not settle in time")) }
        let pause = again.allSatisfy({ $0.1 != .slotOwner }) ? TimeAmount.zero : .milliseconds(Int64(min(500, 25 << min(attempt, 5))))
        let refreshed = needsRefresh ? refresh().map { _ in }.recover { _ in } : eventLoop.makeSucceededVoidFuture()
        let (retried, finished) = (again, done)
        return refreshed.flatMap {
            self.eventLoop.scheduleTask(in: pause) {}.futureResult
        }.flatMap {
            self.send(retried.map(\.0), targets: retried.map(\.1), commands: commands, attempt: attempt + 1, deadline: deadline)
        }.map { finished + $0 }
    }

    private func node(for unit: Unit, target: Target, in map: ClusterSlotMap) -> ClusterNode {
        if case .node(let node, _) = target { return node }
        if let slot = unit.slot, let owner = map.owner(of: slot) { return owner }
        return map.masters[0]
    }

    /// What a unit's replies ask for: nil when it is done.
    private static func redirection(in replies: [RedisValue]) -> (target: Target, refresh: Bool)? {
        for reply in replies {
            guard let message = reply.errorMessage else { continue }
            let words = message.split(separator: " ")
            if words.first == "MOVED" || words.first == "ASK", words.count == 3,
                let colon = words[2].lastIndex(of: ":"), let port = Int(words[2][words[2].index(after: colon)...])
            {
                let node = ClusterNode(host: String(words[2][..<colon]), port: port)
                return words.first == "MOVED" ? (.node(node, asking: false), true) : (.node(node, asking: true), false)
            }
            if words.first == "TRYAGAIN" || words.first == "CLUSTERDOWN" { return (.slotOwner, words.first == "CLUSTERDOWN") }
        }
        return nil
    }

    /// Splits a pipeline into units and gives each the slot of its first key (keyless units
    /// take the slot of the next keyed unit, else of the previous one).
    private static func units(of commands: [[[UInt8]]]) -> [Unit] {
        var units: [Unit] = []
        var index = 0
        while index < commands.count {
            var end = index + 1
            if name(commands[index]) == "MULTI" {
                while end < commands.count, !["EXEC", "DISCARD"].contains(name(commands[end - 1])) { end += 1 }
            }
            let slot = commands[index..<end].lazy.compactMap(RedisKeySlot.routingKey).first.map { RedisKeySlot.slot(of: $0) }
            units.append(Unit(indices: index..<end, slot: slot))
            index = end
        }
        var following: Int?
        for position in units.indices.reversed() {
            if let slot = units[position].slot { following = slot } else { units[position].slot = following }
        }
        var previous: Int?
        for position in units.indices {
            if let slot = units[position].slot { previous = slot } else { units[position].slot = previous }
        }
        return units
    }

    private static func name(_ command: [[UInt8]]) -> String {
        String(decoding: command.first ?? [], as: UTF8.self).uppercased()
    }

    private func client(for node: ClusterNode) -> RedisClient {
        if let client = state.value.nodes[node.address] { return client }
        let client = RedisClient(url: seeds[0].node(host: node.host, port: node.port), timeout: timeout, logger: logger, eventLoop: eventLoop)
        state.value.nodes[node.address] = client
        return client
    }

    private func slotMap() -> EventLoopFuture<ClusterSlotMap> {
        if let map = state.value.map { return eventLoop.makeSucceededFuture(map) }
        return refresh()
    }

    /// Asks the known masters, then the seeds, for `CLUSTER SLOTS` (one refresh at a time).
    private func refresh() -> EventLoopFuture<ClusterSlotMap> {
        if let refreshing = state.value.refreshing { return refreshing }
        let known = state.value.map?.masters ?? []
        let candidates = known + seeds.map { ClusterNode(host: $0.host, port: $0.port) }.filter { !known.contains($0) }
        let refreshing = ask(candidates[...], lastError: nil)
        state.value.refreshing = refreshing
        refreshing.whenComplete { result in
            self.state.value.refreshing = nil
            if case .success(let map) = result { self.state.value.map = map }
        }
        return refreshing
    }

    private func ask(_ candidates: ArraySlice<ClusterNode>, lastError: Error?) -> EventLoopFuture<ClusterSlotMap> {
        guard let node = candidates.first else {
            return eventLoop.makeFailedFuture(RedisError("no Redis Cluster node answered CLUSTER SLOTS: \(lastError.map { "\($0)" } ?? "no nodes")"))
        }
        return client(for: node).command(["CLUSTER", "SLOTS"], on: eventLoop).flatMapThrowing { reply in
            try ClusterSlotMap(clusterSlots: reply, askedHost: node.host)
        }.flatMapError { error in
            self.ask(candidates.dropFirst(), lastError: error)
        }
    }
}
