import ArgumentParser
import Foundation
import SIMPRelay

/// `simp-server sessions [list]` and `simp-server sessions end USER`: the live sessions of
/// every relay on one Redis.
struct SessionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sessions",
        abstract: "List the users logged in to the relays on one Redis, or end a user's session.",
        subcommands: [List.self, End.self],
        defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print every live session: user, relay, UDP address, datagram path, and since when (UTC).",
            discussion: """
                PATH is UDP, or TCP when the client found UDP blocked and its datagrams go over its \
                control connection (docs/PROTOCOL.md §5.5); - for a relay too old to record it.
                """)

        @OptionGroup var options: UserCommand.RedisOption

        func run() async throws {
            try await options.withRedis(command: "sessions") { redis in
                let entries = try await SessionDirectory(redis: redis).list()
                guard !entries.isEmpty else { return print("no sessions") }
                let rows =
                    [["USER", "RELAY", "ADDRESS", "PATH", "SINCE"]]
                    + entries.map { [$0.user, $0.relayId, $0.address, $0.path?.uppercased() ?? "-", Self.time($0.since)] }
                let padded = 0..<4
                let widths = padded.map { column in rows.map { $0[column].count }.max() ?? 0 }
                for row in rows {
                    print(padded.map { row[$0].padding(toLength: widths[$0] + 2, withPad: " ", startingAt: 0) }.joined() + row[4])
                }
            }
        }

        /// `since` (ms since the epoch) as an ISO 8601 time in UTC.
        static func time(_ since: Int64?) -> String {
            guard let since else { return "-" }
            return ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(since) / 1000))
        }
    }

    struct End: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "End a user's session: the relay holding it tells the client and closes the connection.",
            discussion: """
                The client may log in again at once (clients reconnect by themselves); to keep the \
                user out, run `simp-server user lock USER` first.
                """)

        @Argument(help: "The user id.")
        var user: String

        @OptionGroup var options: UserCommand.RedisOption

        func run() async throws {
            try await options.withRedis(command: "sessions end") { redis in
                guard let ended = try await SessionDirectory(redis: redis).end(user) else {
                    printError("simp-server sessions end: \(user) has no session")
                    throw ExitCode.failure
                }
                print("session of \(user) on relay \(ended.relayId) (\(ended.address)) ended")
            }
        }
    }
}
