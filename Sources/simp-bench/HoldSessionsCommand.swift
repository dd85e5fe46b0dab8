import ArgumentParser
import Foundation
import SIMPBench

/// `simp-bench hold-sessions`: the child process `simp-bench --sessions` starts to hold a share
/// of its idle sessions (one process may hold only as many sockets as its open-file limit).
struct HoldSessionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hold-sessions",
        abstract: "Hold idle sessions for simp-bench --sessions (started by simp-bench; not for direct use).",
        discussion: """
            Registers users <prefix>-idle-<first> … on the relays given (session n starts at \
            relay n mod count and moves to the next one when its relay cannot be reached), \
            answers PING, reconnects a dropped session with the reference client's jittered \
            backoff, and prints "connected N" whenever the count changes. Exits on SIGTERM or \
            when the process that started it is gone.
            """,
        shouldDisplay: false)

    @Option(help: "A relay's control address HOST:PORT (repeat for several).")
    var relay: [String] = []

    @Option(help: "A local address to connect from (repeat for several; sessions take them in turn).")
    var source: [String] = ["127.0.0.1"]

    @Option(help: "The first session's number.")
    var first = 0

    @Option(help: "Sessions to hold.")
    var count: Int

    @Option(help: "User name prefix.")
    var prefix: String

    @Option(help: "Every session starts on this relay (its index among --relay; default: session n on relay n mod count).")
    var home: Int?

    @Flag(name: .customLong("no-failover"), help: "A session whose relay cannot be reached keeps trying that relay (default: the next one).")
    var noFailover = false

    @Flag(name: .customLong("reference-keepalive"), help: "Keep alive as an idle reference client does (HELLO every 25 s, PING every 110 s).")
    var referenceKeepalive = false

    func validate() throws {
        guard !relay.isEmpty else { throw ValidationError("give at least one --relay HOST:PORT") }
        guard count >= 1, first >= 0 else { throw ValidationError("--count must be at least 1 and --first not negative") }
        for text in relay { _ = try SIMPBenchCommand.hostPort(text, flag: "--relay") }
        if let home { guard relay.indices.contains(home) else { throw ValidationError("--home must be the index of a --relay") } }
    }

    func run() async throws {
        let relays = try relay.map { try SIMPBenchCommand.hostPort($0, flag: "--relay") }.map { HostPort(host: $0.host, port: $0.port) }
        var plan = IdleSessionPlan(relays: relays, sourceHosts: source, first: first, count: count, prefix: prefix)
        plan.failover = !noFailover
        plan.referenceKeepalive = referenceKeepalive
        plan.home = home
        await IdleSessions.hold(plan) { line in
            FileHandle.standardOutput.write(Data((line + "\n").utf8))
        }
    }
}
