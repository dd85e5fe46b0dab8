import NIOCore
import NIOPosix
import SIMPCore

extension ClientEngine {
    /// What the engine takes from its surroundings rather than deciding itself: how a control
    /// connection is opened, its clocks, its random numbers, its first message id, and who is
    /// told when its scheduled tasks are due. `production` is the process's sockets and clocks;
    /// simp-lab's simulator gives `EmbeddedChannel`s over its modelled links, virtual time on an
    /// `EmbeddedEventLoop` and seeded randomness, so that simulated runs drive this same engine.
    package struct Environment {
        /// Opens a control connection to `server` on `eventLoop`, with its pipeline set up by
        /// `initialize` before it connects; fails with the reason it could not.
        package var connect:
            (_ server: RelayEndpoint, _ eventLoop: EventLoop, _ initialize: @escaping @Sendable (Channel) -> EventLoopFuture<Void>) ->
                EventLoopFuture<Channel>
        /// The monotonic clock the session's deadlines are on (the loop's own clock).
        package var now: () -> NIODeadline
        /// Milliseconds since the Unix epoch, stamped on messages submitted without a time.
        package var wallClockMillis: () -> Int64
        /// A number in 0..<1 for the reconnect backoff's jitter.
        package var random: () -> Double
        /// The random bits of the end-to-end layer (keys, nonces): the system's in production,
        /// seeded in a simulation that must replay.
        package var entropy: Entropy
        /// The id of the first message this engine sends (the next ones count up).
        package var firstMessageId: UInt64
        /// Told the deadline of every task the engine schedules on its loop, so a driver of an
        /// `EmbeddedEventLoop` knows when to move its time on.
        package var taskScheduled: (NIODeadline) -> Void

        package init(
            connect: @escaping (RelayEndpoint, EventLoop, @escaping @Sendable (Channel) -> EventLoopFuture<Void>) -> EventLoopFuture<Channel>,
            now: @escaping () -> NIODeadline, wallClockMillis: @escaping () -> Int64, random: @escaping () -> Double,
            firstMessageId: UInt64, taskScheduled: @escaping (NIODeadline) -> Void = { _ in }, entropy: Entropy = .system
        ) {
            self.connect = connect
            self.now = now
            self.wallClockMillis = wallClockMillis
            self.random = random
            self.firstMessageId = firstMessageId
            self.taskScheduled = taskScheduled
            self.entropy = entropy
        }

        /// TCP sockets (no Nagle, `configuration.connectTimeout`), the system clocks, the system
        /// random source, and the wall clock in microseconds as the first id (so ids keep
        /// increasing across restarts).
        package static func production(_ configuration: ClientConfiguration) -> Environment {
            Environment(
                connect: { server, eventLoop, initialize in
                    ClientBootstrap(group: eventLoop)
                        .channelOption(.socketOption(.tcp_nodelay), value: 1)
                        .connectTimeout(configuration.connectTimeout)
                        .channelInitializer(initialize)
                        .connect(host: server.host, port: server.port)
                },
                now: { .now() }, wallClockMillis: WallClock.millisecondsSinceEpoch, random: { Double.random(in: 0..<1) },
                firstMessageId: WallClock.microsecondsSinceEpoch())
        }
    }
}

/// `Entropy` as a `RandomNumberGenerator`, for the end-to-end layer's `using:` parameters.
struct EntropyGenerator: RandomNumberGenerator {
    var entropy: Entropy

    mutating func next() -> UInt64 { entropy.next() }
}
