import ArgumentParser
import Foundation
import NIOCore
import SIMPBench
import SIMPCore
import SIMPRedis

@main
struct SIMPBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simp-bench",
        abstract: "Open-loop load generator for a SIMP relay: rates, loss and latency percentiles.",
        discussion: """
            Registers --pairs sender/receiver pairs with the relay, warms up, then offers --rate \
            messages per second in total (spread over the pairs) for --duration seconds, whether \
            or not receipts come back. latency_us is send -> delivered at the receiver, \
            receipt_rtt_us is send -> receipt back at the sender (HdrHistogram percentiles). \
            Without --server it starts its own simp-server (next to this executable) and a \
            private redis-server on free loopback ports, and reports the relay's CPU seconds, \
            peak RSS and Redis round trips per forwarded datagram. The bench's users have no \
            passwords, so a relay given with --server must run with --no-login (and a \
            --message-rate above the per-pair rate).
            """,
        version: SIMPVersion.current,
        subcommands: [SealBenchCommand.self, HoldSessionsCommand.self, ClientCostCommand.self, AbuseCommand.self])

    @Option(
        help:
            "A running relay's control address HOST:PORT (started with --no-login), or several, comma-separated: the pairs use the first, --sessions spreads over all. Default: start one."
    )
    var server: String?

    @Option(
        help:
            "Redis for the relays the bench starts, redis://HOST:PORT, or a Redis Cluster, redis+cluster://HOST:PORT[,HOST:PORT…]. Default: a private redis-server. With --server, the relay's Redis, read (INFO) for the --sessions figures."
    )
    var redis: String?

    @Option(name: .customLong("relay-binary"), help: "simp-server to start. Default: the one next to simp-bench.")
    var relayBinary: String?

    @Option(name: .customLong("relay-metrics"), help: "HOST:PORT of a running relay's --metrics-port, to count its Redis round trips.")
    var relayMetrics: String?

    @Option(
        name: .customLong("relay-pid"),
        help: "Process id of a running relay on this machine, for its CPU time and memory (comma-separated, in --server's order, for several).")
    var relayPid: String?

    @Option(
        help:
            "Sender/receiver pairs (each user has its own control connection; the senders of one --loops event loop share one UDP socket, its receivers another)."
    )
    var pairs = 10

    @Option(help: "Messages per second offered in total; with --find-max, the first rate tried.")
    var rate = 10_000.0

    @Option(help: "Datagram size in bytes (TEXT padded to this encoded size).")
    var size = 200

    @Option(help: "Seconds measured.")
    var duration = 10.0

    @Option(help: "Seconds of load before measuring.")
    var warmup = 2.0

    @Flag(
        name: .customLong("find-max"),
        help: "Raise the rate until delivery falls behind or p99 exceeds --max-p99-ms; report the highest sustained rate.")
    var findMax = false

    @Option(name: .customLong("max-p99-ms"), help: "With --find-max: the p99 latency (ms) above which a rate is not sustained.")
    var maxP99Milliseconds = 10.0

    @Option(
        help:
            "Messages a pair may have without receipt before its next offers are skipped (counted as skipped, so the rate is not sustained); 0: no limit."
    )
    var window = 100

    @Flag(
        name: .customLong("single-receipts"),
        help:
            "Receivers send one receipt frame per message, as clients before batched receipts (default: one batch per sender and read burst, docs/PROTOCOL.md section 6.1)."
    )
    var singleReceipts = false

    @Option(
        name: .customLong("messages-per-tick"),
        help:
            "Messages sent per timer tick. 1 (default) spreads them evenly, each sent at its own time 1/rate apart (ticks are at least 50 µs, so above 20,000 msg/s a tick carries several); e.g. 8 sends eight per tick in one sendmmsg, so they queue behind each other in the relay."
    )
    var messagesPerTick = 1

    @Option(
        name: .customLong("receipt-delay-ms"),
        help:
            "Receivers hold receipts up to this long for others to the same sender, so one batch frame covers more messages (checked every tick). Default: the reference client's ReceiptBatcher.defaultDelay; 0 sends them at the end of each read burst; at most 25 (PROTOCOL section 6.1)."
    )
    var receiptDelayMilliseconds = Double(ReceiptBatcher.defaultDelay.nanoseconds) / 1e6

    @Flag(
        name: .customLong("no-receipt-datagrams"),
        help:
            "Receivers send receipts only as TCP frames (default: also a sealed datagram copy of each, as the reference client does, docs/PROTOCOL.md section 6.1; the sender acts on whichever arrives first)."
    )
    var noReceiptDatagrams = false

    @Flag(
        name: .customLong("tcp-path"),
        help:
            "The pairs' datagrams (messages, receipt copies) go in DATAGRAM frames on their control connections, and the relay sends theirs the same way: the path of clients whose network blocks UDP (docs/PROTOCOL.md section 5.5). Default: over UDP."
    )
    var tcpPath = false

    @Option(
        help:
            "Event loops (threads) the bench splits its pairs across, each with its own UDP sockets and its share of the rate; at most --pairs. Default 2 (1 on a one-core machine): on two cores one loop's own queueing limits --find-max above about 20,000 msg/s; 1 costs the bench less CPU per message."
    )
    var loops = min(2, ProcessInfo.processInfo.activeProcessorCount)

    @Option(
        help:
            "Idle users to register and hold during the run (e.g. 10000). Reports what they cost: the relay's RSS over its baseline per session, its CPU in the measured window (percent of a core per 10,000 sessions), Redis commands per second (INFO total_commands_processed) and Redis memory per session. The relay figures need the relay's process (started by the bench, or --relay-pid), the Redis ones its Redis (started by the bench, or --redis). Measure at two counts (e.g. 2000 and 18000) and take the difference for the marginal cost; raise the open-file limit first (ulimit -n)."
    )
    var sessions = 0

    @Option(
        help:
            "Relays to start on one Redis (without --server). Above 1, pair n's sender uses relay n mod N and its receiver relay n+1 mod N, so every message takes the cross-relay hop through Redis; idle session n starts on relay n mod N. The figures are given per relay and in total."
    )
    var relays = 1

    @Option(
        name: .customLong("source-addresses"),
        help:
            "Local addresses 127.0.0.1, 127.0.0.2 … the idle sessions connect from, in turn (one address has about 28,000 ephemeral ports). Default: one per 10,000 sessions."
    )
    var sourceAddresses = 0

    @Flag(
        name: .customLong("reference-keepalive"),
        help:
            "The idle sessions keep alive as idle reference clients do: a sealed HELLO datagram every 25 s (the UDP keepalive, which the relay opens and answers) and a PING every 110 s. Default: they only answer the relay's PINGs (every 120 s of silence)."
    )
    var referenceKeepalive = false

    @Flag(
        name: .customLong("restart-relay"),
        help:
            "With --sessions and --relays 2 or more: every idle session starts on relay 0; one second into the window, kill relay 0 (SIGKILL) and start it again on the same ports; report how long its sessions take to come back (they reconnect with the reference client's jittered backoff). The pairs use the other relays."
    )
    var restartRelay = false

    @Flag(
        name: .customLong("kill-relay"),
        help:
            "With --sessions and --relays 2 or more: every idle session starts on relay 0; one second into the window, kill relay 0 (SIGKILL) for good; report how long its sessions take to be back on the other relays, and the pairs' losses (the pairs use the other relays)."
    )
    var killRelay = false

    @Option(name: .customLong("recovery-timeout"), help: "Seconds to wait for a killed relay's sessions to come back.")
    var recoveryTimeout = 60.0

    @Flag(help: "Print the report as one JSON object instead of a table.")
    var json = false

    func validate() throws {
        guard pairs >= 1 else { throw ValidationError("--pairs must be at least 1") }
        guard rate > 0 else { throw ValidationError("--rate must be positive") }
        guard (64...8192).contains(size) else { throw ValidationError("--size must be 64-8192") }
        guard duration > 0, warmup >= 0 else { throw ValidationError("--duration must be positive and --warmup not negative") }
        guard window >= 0 else { throw ValidationError("--window must not be negative") }
        guard messagesPerTick >= 1 else { throw ValidationError("--messages-per-tick must be at least 1") }
        guard (0...25).contains(receiptDelayMilliseconds) else {
            throw ValidationError("--receipt-delay-ms must be 0-25 (a receiver keeps a receipt back at most 25 ms, docs/PROTOCOL.md section 6.1)")
        }
        guard loops >= 1 else { throw ValidationError("--loops must be at least 1") }
        guard sessions >= 0 else { throw ValidationError("--sessions must not be negative") }
        guard relays >= 1 else { throw ValidationError("--relays must be at least 1") }
        guard relays == 1 || server == nil else { throw ValidationError("--relays starts its own relays; it cannot be combined with --server") }
        guard sourceAddresses >= 0, sourceAddresses <= 254 else { throw ValidationError("--source-addresses must be 0-254") }
        if restartRelay || killRelay {
            guard !(restartRelay && killRelay) else { throw ValidationError("give --restart-relay or --kill-relay, not both") }
            guard sessions > 0, relays >= 2, !findMax else {
                throw ValidationError("--restart-relay and --kill-relay need --sessions, --relays 2 or more, and no --find-max")
            }
            guard recoveryTimeout > 0 else { throw ValidationError("--recovery-timeout must be positive") }
        }
        if let server { _ = try Self.hostPorts(server, flag: "--server") }
        if let relayPid {
            guard relayPid.split(separator: ",").allSatisfy({ Int32($0) != nil }) else {
                throw ValidationError("--relay-pid must be process ids, comma-separated")
            }
        }
        if let relayMetrics { _ = try Self.hostPort(relayMetrics, flag: "--relay-metrics") }
        if let redis { do { _ = try RedisEndpoint(parsing: redis) } catch { throw ValidationError("\(error)") } }
    }

    func run() async throws {
        var options = BenchOptions()
        let servers = try server.map { try Self.hostPorts($0, flag: "--server") } ?? []
        options.server = servers.first.map { ($0.host, $0.port) }
        options.extraServers = Array(servers.dropFirst())
        options.redis = try redis.map { try RedisEndpoint(parsing: $0) }
        options.relayBinary = relayBinary.map { URL(fileURLWithPath: $0) }
        options.relayMetrics = try relayMetrics.map { try Self.hostPort($0, flag: "--relay-metrics") }
        options.relayPids = relayPid?.split(separator: ",").compactMap { Int32($0) } ?? []
        options.sourceAddresses = sourceAddresses
        options.referenceKeepalive = referenceKeepalive
        options.disruption = restartRelay ? .restart : (killRelay ? .kill : nil)
        options.recoveryTimeout = .nanoseconds(Int64(recoveryTimeout * 1e9))
        options.pairs = pairs
        options.relays = relays
        options.rate = rate
        options.size = size
        options.duration = .nanoseconds(Int64(duration * 1e9))
        options.warmup = .nanoseconds(Int64(warmup * 1e9))
        options.findMax = findMax
        options.window = window
        options.batchesReceipts = !singleReceipts
        options.maxP99 = .nanoseconds(Int64(maxP99Milliseconds * 1e6))
        options.sessions = sessions
        options.messagesPerTick = messagesPerTick
        options.receiptDelay = .nanoseconds(Int64(receiptDelayMilliseconds * 1e6))
        options.receiptDatagrams = !noReceiptDatagrams
        options.tcpPath = tcpPath
        options.loops = loops
        do {
            let report = try await BenchRunner.run(options) { line in
                FileHandle.standardError.write(Data("simp-bench: \(line)\n".utf8))
            }
            print(json ? report.json() : report.table())
        } catch {
            FileHandle.standardError.write(Data("simp-bench: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }

    static func hostPorts(_ text: String, flag: String) throws -> [HostPort] {
        try text.split(separator: ",").map { try hostPort(String($0), flag: flag) }.map { HostPort(host: $0.host, port: $0.port) }
    }

    static func hostPort(_ text: String, flag: String) throws -> (host: String, port: Int) {
        guard let parsed = AddressText.parseHostPort(text) else {
            throw ValidationError("\(flag) must be HOST:PORT, e.g. 127.0.0.1:7600")
        }
        return parsed
    }
}
