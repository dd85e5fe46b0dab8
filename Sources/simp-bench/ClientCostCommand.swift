import ArgumentParser
import Foundation
import SIMPBench

/// `simp-bench client`: what the reference client spends per message, end to end and plain.
struct ClientCostCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "client",
        abstract: "CPU per message in the reference client (SIMPClient), with end-to-end encryption and without.",
        discussion: """
            Starts its own simp-server (next to simp-bench, or simp-bench's --relay-binary) and a private \
            redis-server. Each of --rounds rounds connects two fresh users, plain and then with \
            end-to-end encryption (the order alternates by round), sends one warm-up message each \
            way (with end to end: the key fetch and session start, left out), then --messages TEXT \
            messages of --text-length characters at --send-rate per second, and waits until every one \
            is receipted and delivered. Each client runs on its own event loop thread, where it \
            seals, encrypts, decrypts and saves its end-to-end state, so the thread's CPU time over \
            the window, divided by the messages, is that client's cost per message. The table \
            shows the median round of each mode: sender and receiver (or alice and bob with \
            --pattern alternating, where every message also makes a Diffie-Hellman ratchet step), \
            both clients together, the whole bench process, and the relay, with the ratios.
            """)

    @Option(help: "Messages per round and mode.")
    var messages = 2_000

    @Option(help: "Rounds; each measures both modes.")
    var rounds = 3

    // Not --rate: simp-bench's own --rate (its load generator's) would take that flag.
    @Option(name: .customLong("send-rate"), help: "Messages per second offered.")
    var sendRate = 500.0

    @Option(name: .customLong("text-length"), help: "Characters of text per message.")
    var textLength = 100

    @Option(help: "one-way (alice to bob) or alternating (alice and bob take turns).")
    var pattern = ClientCostBench.Pattern.oneWay

    @Flag(
        help: """
            Clients keep an outbox under a temporary home, as simp's do: each message is made durable \
            there (one fdatasync per burst of submissions) before it leaves, in both modes.
            """)
    var outbox = false

    @Flag(help: "Print the report as one JSON object instead of a table.")
    var json = false

    /// `simp-bench`'s own `--json` takes the flag when both could: read either.
    @ParentCommand var bench: SIMPBenchCommand

    func validate() throws {
        guard messages >= 1, rounds >= 1 else { throw ValidationError("--messages and --rounds must be at least 1") }
        guard sendRate > 0 else { throw ValidationError("--send-rate must be positive") }
        guard (1...4_000).contains(textLength) else { throw ValidationError("--text-length must be 1-4000") }
    }

    func run() async throws {
        var options = ClientCostBench.Options()
        options.messages = messages
        options.rounds = rounds
        options.rate = sendRate
        options.textLength = textLength
        options.pattern = pattern
        options.outbox = outbox
        let binary = bench.relayBinary.map { URL(fileURLWithPath: $0) } ?? LocalRelay.siblingBinary()
        let report = try await ClientCostBench.run(options: options, relayBinary: binary)
        print(json || bench.json ? report.json() : report.table())
    }
}

extension ClientCostBench.Pattern: ExpressibleByArgument {}
