import Foundation

/// Everything `simp-bench` reports: printed as a table, or with `--json` as one JSON object.
public struct BenchReport: Codable, Sendable {
    /// How the run was set up.
    public struct Parameters: Codable, Sendable {
        public var mode: String
        public var relay: String
        public var pairs: Int
        public var rate: Double
        public var size: Int
        public var durationSeconds: Double
        public var warmupSeconds: Double
        /// Messages the generator sent per timer tick (1: spread evenly).
        public var messagesPerTick: Int
        /// How long receivers held receipts to batch them, µs (0: until the read burst ended).
        public var receiptDelayUs: Int64
        /// Receivers sent a datagram copy of each receipt frame.
        public var receiptDatagrams: Bool
        /// The pairs' datagrams went in DATAGRAM frames on their control connections (the path
        /// of clients whose network blocks UDP), not over UDP.
        public var tcpPath = false
        /// Event loops (threads) the bench's pairs were split across.
        public var loops: Int
        public var sessions: Int?
    }

    /// The relay's own figures, when the bench started it or was told how to read them.
    public struct RelayFigures: Codable, Sendable {
        /// CPU seconds (user + system) the relay used during the measurement window.
        public var cpuSeconds: Double?
        /// Peak resident set size of the relay process (VmHWM).
        public var peakRSSBytes: Int?
        /// Resident set size at the end of the run.
        public var rssBytes: Int?
        /// Datagrams the relay forwarded while the bench measured (from /metrics).
        public var forwarded: Double?
        /// Redis round trips the relay made while the bench measured (from /metrics).
        public var redisRoundTrips: Double?
        public var redisRoundTripsPerForwarded: Double?
    }

    /// One rate tried by `--find-max`.
    public struct Step: Codable, Sendable {
        public var offeredRate: Double
        public var deliveredRate: Double
        public var receiptRate: Double
        public var latencyP99: UInt64
        public var sustained: Bool
    }

    /// `--sessions` figures.
    public struct Sessions: Codable, Sendable {
        public var connected: Int
        public var connectSeconds: Double
        /// The relay's resident set size once all sessions were registered.
        public var relayRSSBytes: Int?
        /// The relay's resident set size before the sessions connected.
        public var relayBaselineRSSBytes: Int?
        /// Relay RSS over its baseline, per session.
        public var rssBytesPerSession: Double?
        /// Relay CPU in the measured window, in cores (1 = one core busy), and per 10,000
        /// sessions in percent of a core (everything the relay did, the pairs' messages included).
        public var relayCores: Double?
        public var relayCPUPercentPer10kSessions: Double?
        /// Commands Redis executed per second in the measured window (INFO
        /// `total_commands_processed`: every relay's, scripts' inner commands included), and
        /// per session.
        public var redisCommandsPerSecond: Double?
        public var redisCommandsPerSessionPerSecond: Double?
        /// Redis `used_memory` with the sessions, and over its value before them per session.
        public var redisUsedMemoryBytes: Int?
        public var redisMemoryBytesPerSession: Double?
        /// Each relay's share (the totals above add them up).
        public var relays: [RelayShare] = []
        /// Local addresses the sessions connected from.
        public var sourceAddresses: Int?
        /// The machine's slab memory over its value before the sessions, per session (both ends
        /// of each loopback connection: the relay's socket and the bench's), and the TCP buffer
        /// memory in use at the end (/proc/net/sockstat), machine-wide.
        public var kernelSlabBytesPerSession: Double?
        public var kernelTCPBufferBytes: Int?
        /// CPU of the processes holding the idle sessions in the window, in cores.
        public var loadGeneratorCores: Double?
        /// The machine's load averages at the end (1, 5, 15 min; other work shares the machine).
        public var loadAverage: String?
        /// `--restart-relay` / `--kill-relay`.
        public var disruption: Disruption?

        public init(connected: Int, connectSeconds: Double, relayRSSBytes: Int?, relayBaselineRSSBytes: Int?) {
            self.connected = connected
            self.connectSeconds = connectSeconds
            self.relayRSSBytes = relayRSSBytes
            self.relayBaselineRSSBytes = relayBaselineRSSBytes
        }
    }

    /// One relay's figures in a `--sessions` run.
    public struct RelayShare: Codable, Sendable {
        /// Sessions that started on it.
        public var sessions: Int
        public var baselineRSSBytes: Int?
        public var rssBytes: Int?
        /// CPU seconds in the window.
        public var cpuSeconds: Double?
        public var rssBytesPerSession: Double?
        public var cores: Double?
        public var cpuPercentPer10kSessions: Double?

        public init(sessions: Int, baselineRSSBytes: Int?, rssBytes: Int?, cpuSeconds: Double?) {
            self.sessions = sessions
            self.baselineRSSBytes = baselineRSSBytes
            self.rssBytes = rssBytes
            self.cpuSeconds = cpuSeconds
        }

        enum CodingKeys: String, CodingKey {
            case sessions, baselineRSSBytes = "baseline_rss_bytes", rssBytes = "rss_bytes", cpuSeconds = "cpu_seconds"
            case rssBytesPerSession = "rss_bytes_per_session", cores, cpuPercentPer10kSessions = "cpu_percent_per_10k_sessions"
        }
    }

    /// What became of the sessions when relay 0 was killed (and restarted) one second into the
    /// window: seconds from the kill until this share of the sessions missing at the lowest
    /// point were connected again (to any relay); nil if not within the recovery timeout.
    public struct Disruption: Codable, Sendable {
        /// "restart" or "kill".
        public var kind: String
        public var sessionsBefore: Int
        /// The fewest sessions connected after the kill.
        public var lowest: Int?
        /// When the restarted relay served again.
        public var relayServingAfterSeconds: Double?
        public var half: Double?
        public var ninetyPercent: Double?
        public var ninetyNinePercent: Double?
        public var all: Double?

        public init(kind: String, sessionsBefore: Int) {
            self.kind = kind
            self.sessionsBefore = sessionsBefore
        }

        enum CodingKeys: String, CodingKey {
            case kind, sessionsBefore = "sessions_before", lowest, relayServingAfterSeconds = "relay_serving_after_s"
            case half = "half_back_after_s", ninetyPercent = "p90_back_after_s", ninetyNinePercent = "p99_back_after_s"
            case all = "all_back_after_s"
        }
    }

    public var parameters: Parameters
    public var machine: MachineInfo
    public var offeredRate: Double
    /// Messages due in the window but not offered: their pair's window (`--window`) was full.
    public var skipped: Int
    public var deliveredRate: Double
    public var receiptRate: Double
    public var failed: Int
    public var unresolved: Int
    /// Messages handed to the receiving application more than once.
    public var duplicates: Int
    /// Duplicate datagram arrivals suppressed by the receiver.
    public var suppressed: Int
    public var retransmits: Int
    /// Receipt frames the receivers sent per delivered message (1 without batches).
    public var receiptFramesPerMessage: Double?
    /// Receipt datagrams (copies of receipt frames) the receivers sent, and the share of
    /// messages whose receipt reached the sender first as a datagram.
    public var receiptDatagrams: Int
    public var receiptsFirstByDatagramFraction: Double?
    public var generatorMaxLagUs: Int64
    public var smoothedRTTUs: Int64?
    public var latencyUs: LatencySummary
    public var receiptRTTUs: LatencySummary
    public var relay: RelayFigures?
    /// CPU seconds the bench itself used during the window (it shares the machine).
    public var benchCPUSeconds: Double?
    public var maxSustainedRate: Double?
    public var steps: [Step]?
    public var sessions: Sessions?

    enum CodingKeys: String, CodingKey {
        case parameters, machine, offeredRate = "offered_rate", skipped, deliveredRate = "delivered_rate"
        case receiptRate = "receipt_rate", failed, unresolved, duplicates, suppressed, retransmits
        case receiptFramesPerMessage = "receipt_frames_per_message", receiptDatagrams = "receipt_datagrams"
        case receiptsFirstByDatagramFraction = "receipts_first_by_datagram_fraction"
        case generatorMaxLagUs = "generator_max_lag_us", smoothedRTTUs = "smoothed_rtt_us"
        case latencyUs = "latency_us", receiptRTTUs = "receipt_rtt_us", relay, benchCPUSeconds = "bench_cpu_seconds"
        case maxSustainedRate = "max_sustained_rate", steps, sessions
    }

    init(parameters: Parameters, result: LoadResult) {
        self.parameters = parameters
        machine = MachineInfo.current()
        offeredRate = Double(result.offered) / result.seconds
        skipped = result.skipped
        deliveredRate = Double(result.delivered) / result.seconds
        receiptRate = Double(result.receipts) / result.seconds
        failed = result.failed
        unresolved = result.unresolved
        duplicates = result.duplicates
        suppressed = result.suppressed
        retransmits = result.retransmits
        receiptFramesPerMessage = result.delivered > 0 ? Double(result.receiptFrames) / Double(result.delivered) : nil
        receiptDatagrams = result.receiptDatagrams
        receiptsFirstByDatagramFraction = result.receipts > 0 ? Double(result.receiptsFirstByDatagram) / Double(result.receipts) : nil
        generatorMaxLagUs = result.generatorMaxLag.nanoseconds / 1000
        smoothedRTTUs = result.smoothedRTT.map { $0.nanoseconds / 1000 }
        latencyUs = result.latency.summary
        receiptRTTUs = result.receiptRTT.summary
    }

    /// One JSON object.
    public func json() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self)
    }

    /// A human-readable table.
    public func table() -> String {
        var rows: [(String, String)] = [
            ("mode", parameters.mode), ("relay", parameters.relay),
            ("machine", "\(machine.nproc) × \(machine.cpuModel)"),
            (
                "pairs / size",
                "\(parameters.pairs) pairs on \(parameters.loops) event loop\(parameters.loops == 1 ? "" : "s"), \(parameters.size) B datagrams"
                    + (parameters.tcpPath ? ", in DATAGRAM frames on the control connections (TCP path)" : "")
            ),
            ("window", "\(format(parameters.durationSeconds)) s after \(format(parameters.warmupSeconds)) s warm-up"),
            (
                "target rate",
                "\(format(parameters.rate)) msg/s, "
                    + (parameters.messagesPerTick == 1
                        ? "spread evenly" : "\(parameters.messagesPerTick) per timer tick")
            ),
            ("offered_rate", "\(format(offeredRate)) msg/s" + (skipped > 0 ? " (\(skipped) skipped: windows full)" : "")),
            ("delivered_rate", "\(format(deliveredRate)) msg/s"),
            ("receipt_rate", "\(format(receiptRate)) msg/s"),
            ("failed / unresolved", "\(failed) / \(unresolved)"),
            ("duplicates / suppressed / retransmits", "\(duplicates) / \(suppressed) / \(retransmits)"),
            ("latency_us", summaryText(latencyUs)),
            ("receipt_rtt_us", summaryText(receiptRTTUs)),
            (
                "receipt frames per message",
                (receiptFramesPerMessage.map { String(format: "%.3f", $0) } ?? "-")
                    + (parameters.receiptDelayUs > 0
                        ? " (receipts held up to \(parameters.receiptDelayUs) µs)" : " (sent at the end of each read burst)")
            ),
            (
                "receipt datagrams",
                parameters.receiptDatagrams
                    ? "\(receiptDatagrams) copies sent; \(receiptsFirstByDatagramFraction.map { String(format: "%.1f", 100 * $0) } ?? "-") % of receipts arrived first as a datagram"
                    : "off (TCP frames only)"
            ),
            ("generator max lag", "\(generatorMaxLagUs) µs"),
        ]
        if let cpu = benchCPUSeconds { rows.append(("bench CPU", cpuText(cpu))) }
        if let relay {
            if let cpu = relay.cpuSeconds { rows.append(("relay CPU", cpuText(cpu))) }
            if let peak = relay.peakRSSBytes { rows.append(("relay peak RSS", megabytes(peak))) }
            if let trips = relay.redisRoundTrips, let forwarded = relay.forwarded {
                rows.append(
                    (
                        "Redis round trips",
                        "\(Int(trips)) for \(Int(forwarded)) forwarded (\(String(format: "%.5f", relay.redisRoundTripsPerForwarded ?? 0)) each)"
                    ))
            }
        }
        if let sessions {
            rows.append(("sessions", "\(sessions.connected) connected in \(format(sessions.connectSeconds)) s"))
            if let rss = sessions.relayRSSBytes { rows.append(("relay RSS with sessions", megabytes(rss))) }
            if let perSession = sessions.rssBytesPerSession, let base = sessions.relayBaselineRSSBytes {
                rows.append(("relay RSS per session", "\(Int(perSession)) B over a baseline of \(megabytes(base))"))
            }
            if let cores = sessions.relayCores, let per10k = sessions.relayCPUPercentPer10kSessions {
                rows.append(("relay CPU", String(format: "%.2f %% of a core (%.2f %% per 10,000 sessions)", cores * 100, per10k)))
            }
            if let rate = sessions.redisCommandsPerSecond, let perSession = sessions.redisCommandsPerSessionPerSecond {
                rows.append(("Redis commands", String(format: "%.0f/s (%.4f per session per second)", rate, perSession)))
            }
            if let memory = sessions.redisUsedMemoryBytes, let perSession = sessions.redisMemoryBytesPerSession {
                rows.append(("Redis memory", "\(megabytes(memory)) (\(Int(perSession)) B per session)"))
            }
            if sessions.relays.count > 1 {
                for (index, relay) in sessions.relays.enumerated() {
                    rows.append(("relay \(index)", sessionShareText(relay)))
                }
            }
            if let slab = sessions.kernelSlabBytesPerSession {
                rows.append(
                    (
                        "kernel memory", "slab \(Int(slab)) B per session (both ends), TCP buffers \(megabytes(sessions.kernelTCPBufferBytes ?? 0))"
                    ))
            }
            if let cores = sessions.loadGeneratorCores {
                rows.append(("session holders' CPU", String(format: "%.2f %% of a core", cores * 100)))
            }
            if let disruption = sessions.disruption { rows.append(("relay 0 \(disruption.kind)", disruptionText(disruption))) }
            if let load = sessions.loadAverage { rows.append(("load average", load)) }
        }
        if let maxSustainedRate { rows.append(("max sustained rate", "\(format(maxSustainedRate)) msg/s")) }
        let width = rows.map(\.0.count).max() ?? 0
        var lines = rows.map { $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + $0.1 }
        if let steps {
            lines.append("")
            lines.append("offered/s  delivered/s  receipts/s  p99 µs  sustained")
            for step in steps {
                lines.append(
                    [
                        format(step.offeredRate).leftPadded(9), format(step.deliveredRate).leftPadded(11),
                        format(step.receiptRate).leftPadded(10), String(step.latencyP99).leftPadded(6),
                        step.sustained ? "yes" : "no",
                    ].joined(separator: "  "))
            }
        }
        return lines.joined(separator: "\n")
    }

    private func sessionShareText(_ relay: RelayShare) -> String {
        var parts = ["\(relay.sessions) sessions"]
        if let rss = relay.rssBytes { parts.append("RSS \(megabytes(rss))") }
        if let perSession = relay.rssBytesPerSession { parts.append("\(Int(perSession)) B per session") }
        if let cores = relay.cores { parts.append(String(format: "CPU %.2f %% of a core", cores * 100)) }
        return parts.joined(separator: ", ")
    }

    private func disruptionText(_ disruption: Disruption) -> String {
        func at(_ seconds: Double?) -> String { seconds.map { String(format: "%.2f s", $0) } ?? "not within the timeout" }
        return "\(disruption.sessionsBefore) sessions up, lowest \(disruption.lowest ?? 0); missing ones back: half \(at(disruption.half)), "
            + "90 % \(at(disruption.ninetyPercent)), 99 % \(at(disruption.ninetyNinePercent)), all \(at(disruption.all))"
            + (disruption.relayServingAfterSeconds.map { String(format: " (relay serving again after %.2f s)", $0) } ?? "")
    }

    /// CPU seconds in the window, as a share of one core and per delivered message.
    private func cpuText(_ seconds: Double) -> String {
        let delivered = deliveredRate * parameters.durationSeconds
        let perMessage = delivered > 0 ? String(format: ", %.1f µs per delivered message", seconds * 1e6 / delivered) : ""
        return "\(format(seconds)) s (\(format(100 * seconds / parameters.durationSeconds)) % of one core\(perMessage))"
    }

    private func summaryText(_ s: LatencySummary) -> String {
        "p50 \(s.p50)  p95 \(s.p95)  p99 \(s.p99)  p999 \(s.p999)  max \(s.max)  (n=\(s.count))"
    }
    private func format(_ value: Double) -> String {
        value >= 100 ? String(Int(value.rounded())) : String(format: "%.2f", value)
    }
    private func megabytes(_ bytes: Int) -> String { String(format: "%.1f MB", Double(bytes) / 1_048_576) }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}

extension BenchReport.Parameters {
    enum CodingKeys: String, CodingKey {
        case mode, relay, pairs, rate, size, durationSeconds = "duration_s", warmupSeconds = "warmup_s"
        case messagesPerTick = "messages_per_tick", receiptDelayUs = "receipt_delay_us"
        case receiptDatagrams = "receipt_datagrams", tcpPath = "tcp_path", loops, sessions
    }
}

extension BenchReport.RelayFigures {
    enum CodingKeys: String, CodingKey {
        case cpuSeconds = "cpu_seconds", peakRSSBytes = "peak_rss_bytes", rssBytes = "rss_bytes", forwarded
        case redisRoundTrips = "redis_round_trips", redisRoundTripsPerForwarded = "redis_round_trips_per_forwarded"
    }
}

extension BenchReport.Step {
    enum CodingKeys: String, CodingKey {
        case offeredRate = "offered_rate", deliveredRate = "delivered_rate", receiptRate = "receipt_rate"
        case latencyP99 = "latency_p99_us", sustained
    }
}

extension BenchReport.Sessions {
    enum CodingKeys: String, CodingKey {
        case connected, connectSeconds = "connect_seconds", relayRSSBytes = "relay_rss_bytes"
        case relayBaselineRSSBytes = "relay_baseline_rss_bytes", rssBytesPerSession = "relay_rss_bytes_per_session"
        case relayCores = "relay_cores", relayCPUPercentPer10kSessions = "relay_cpu_percent_per_10k_sessions"
        case redisCommandsPerSecond = "redis_commands_per_second", redisCommandsPerSessionPerSecond = "redis_commands_per_session_per_second"
        case redisUsedMemoryBytes = "redis_used_memory_bytes", redisMemoryBytesPerSession = "redis_memory_bytes_per_session"
        case relays, sourceAddresses = "source_addresses", kernelSlabBytesPerSession = "kernel_slab_bytes_per_session"
        case kernelTCPBufferBytes = "kernel_tcp_buffer_bytes", loadGeneratorCores = "load_generator_cores"
        case loadAverage = "load_average", disruption
    }
}
