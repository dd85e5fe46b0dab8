import NIOConcurrencyHelpers
import NIOCore

/// Several `LoadGenerator`s measured as one: the pairs are split as evenly as possible across
/// `loops` generators, each with its own event loop (thread) and its own two UDP sockets, so
/// the bench can use more than one core. They all start their schedules at the same instant,
/// each offering its share of the rate (in proportion to its pairs), and their results are
/// merged into one (`LoadResult.merged`).
public final class ParallelLoad: Sendable {
    /// The generators, one per event loop.
    public let generators: [LoadGenerator]

    /// `parameters.pairs` pairs split over `loops` generators (at most one per pair).
    public init(parameters: LoadGenerator.Parameters, loops: Int) {
        let loops = max(1, min(loops, parameters.pairs))
        var generators: [LoadGenerator] = []
        var firstPair = parameters.firstPair
        for index in 0..<loops {
            var part = parameters
            part.firstPair = firstPair
            part.pairs = parameters.pairs / loops + (index < parameters.pairs % loops ? 1 : 0)
            firstPair += part.pairs
            generators.append(LoadGenerator(parameters: part))
        }
        self.generators = generators
    }

    /// Registers every generator's pairs (all at once).
    public func connect() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for generator in generators { group.addTask { try await generator.connect() } }
            try await group.waitForAll()
        }
    }

    /// Like `LoadGenerator.measure`, for all generators together. `atWindowEdge(true)` comes
    /// when the first generator starts counting and `atWindowEdge(false)` when the last one
    /// stops, so what is read there (the relay's CPU time) covers every generator's window.
    public func measure(
        rate: Double, duration: TimeAmount, warmup: TimeAmount, drain: TimeAmount = .seconds(2),
        atWindowEdge: @escaping @Sendable (_ starts: Bool) -> Void = { _ in }
    ) async throws -> LoadResult {
        let edges = NIOLockedValueBox((started: 0, stopped: 0))
        let count = generators.count
        let onEdge: @Sendable (Bool) -> Void = { starts in
            // Called on each generator's loop; the lock orders the calls of atWindowEdge too.
            edges.withLockedValue { edges in
                if starts {
                    edges.started += 1
                    if edges.started == 1 { atWindowEdge(true) }
                } else {
                    edges.stopped += 1
                    if edges.stopped == count { atWindowEdge(false) }
                }
            }
        }
        // Far enough ahead that every loop has its first tick scheduled before it is due.
        let start = NIODeadline.now() + .milliseconds(20)
        let totalPairs = Double(generators.reduce(0) { $0 + $1.parameters.pairs })
        let results = try await withThrowingTaskGroup(of: LoadResult.self) { group in
            for generator in generators {
                let share = rate * Double(generator.parameters.pairs) / totalPairs
                group.addTask {
                    try await generator.measure(
                        rate: share, duration: duration, warmup: warmup, drain: drain,
                        start: start, atWindowEdge: onEdge)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        return LoadResult.merged(results)
    }

    /// Closes every generator's connections and event loop.
    public func close() async {
        for generator in generators { await generator.close() }
    }
}
