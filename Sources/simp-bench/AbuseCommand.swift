import ArgumentParser
import Foundation
import SIMPBench

/// `simp-bench abuse`: the relay's memory and a third user's service during each attack.
struct AbuseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "abuse",
        abstract: "The relay under each abuse attack: its RSS before, during and after, Redis growth, and a third user's logins and sends.",
        discussion: """
            Starts its own simp-server (next to simp-bench, or simp-bench's --relay-binary) with its \
            default limits and --no-login, and a private redis-server. Then, one after another: a \
            KEYS_FETCH flood, a KEYS_PUBLISH flood (100 one-time prekeys a frame), a ROOM_JOIN flood \
            (a new room each), each from one scripted user on its own 127.0.0.x address that never \
            reads its answers, and 2,000 idle plus 200 half-frame connections from 40 addresses \
            (fewer if the open-file limit is lower). Throughout each attack a third user logs in \
            every 200 ms with the reference client and sends one message to a receiver. Reported: \
            the relay's RSS before, its highest during and --settle seconds after the attack; \
            Redis's used_memory growth; the third user's logins and send latencies (until the \
            receipt); and whether the bars are met (RSS back within 20 % of before, Redis +50 MB at \
            most, logins within 2 s, send p99 within 500 ms).
            """)

    @Option(help: "Seconds each attack lasts.")
    var duration = 10

    @Option(help: "Seconds after an attack before the relay's RSS is read again.")
    var settle = 30

    @Option(help: "Attacks to run, comma-separated: key-fetch, prekey-publish, room-join, idle (default: all).")
    var attacks: String?

    @Flag(help: "Print the report as one JSON object instead of a table.")
    var json = false

    @ParentCommand var bench: SIMPBenchCommand

    func validate() throws {
        guard duration >= 1, settle >= 0 else { throw ValidationError("--duration must be at least 1 and --settle not negative") }
        _ = try selectedAttacks()
    }

    private func selectedAttacks() throws -> [AbuseAttack] {
        guard let attacks else { return AbuseAttack.allCases }
        return try attacks.split(separator: ",").map { name in
            guard let attack = AbuseAttack.allCases.first(where: { $0.rawValue.hasPrefix(name.trimmingCharacters(in: .whitespaces) + " ") }) else {
                throw ValidationError("unknown attack \(name): key-fetch, prekey-publish, room-join or idle")
            }
            return attack
        }
    }

    func run() async throws {
        var options = AbuseBench.Options()
        options.duration = .seconds(duration)
        options.settle = .seconds(settle)
        options.attacks = try selectedAttacks()
        let binary = bench.relayBinary.map { URL(fileURLWithPath: $0) } ?? LocalRelay.siblingBinary()
        let report = try await AbuseBench.run(options: options, relayBinary: binary) { line in
            FileHandle.standardError.write(Data("simp-bench abuse: \(line)\n".utf8))
        }
        print(json || bench.json ? report.json() : report.table())
    }
}
