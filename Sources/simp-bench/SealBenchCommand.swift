import ArgumentParser
import CAllocationCounter
import Foundation
import SIMPBench

/// `simp-bench seal`: what sealing costs the relay per datagram.
struct SealBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "seal",
        abstract: "Time the datagram seal on the relay's path: open + seal per datagram, previous HMAC seal vs AEADs.",
        discussion: """
            For each seal, the bench seals --datagrams datagrams of a --size-byte TEXT payload as a \
            sender would, then times the relay's work on them: open (check, decrypt, replay window) \
            and seal the payload again for the receiver. Seals alternate within each of --rounds \
            rounds; the table shows the best and the median round, in nanoseconds per datagram, and \
            heap allocations per datagram (counted by simp-bench's own allocator wrappers). No \
            relay or Redis is needed.
            """)

    @Option(help: "Payload size in bytes (an encoded TEXT message).")
    var size = 200

    @Option(help: "Datagrams per round.")
    var datagrams = 20_000

    @Option(help: "Rounds per seal.")
    var rounds = 5

    @Flag(help: "Print the report as one JSON object instead of a table.")
    var json = false

    /// `simp-bench`'s own `--json` takes the flag when both could: read either.
    @ParentCommand var bench: SIMPBenchCommand

    func validate() throws {
        guard (64...8192).contains(size) else { throw ValidationError("--size must be 64-8192") }
        guard datagrams >= 1, rounds >= 1 else { throw ValidationError("--datagrams and --rounds must be at least 1") }
    }

    func run() throws {
        let counter: (() -> Int)? = simp_thread_allocations() >= 0 ? { Int(simp_thread_allocations()) } : nil
        let report = try SealBench.run(payloadSize: size, datagrams: datagrams, rounds: rounds, allocations: counter)
        print(json || bench.json ? report.json() : report.table())
    }
}
