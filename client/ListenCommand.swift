import ArgumentParser
import Foundation
import Logging
import NIOCore
import SIMPChat
import SIMPClient
import SIMPCore
import ServiceLifecycle

struct Listen: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Wait for messages and print each one (once, however often it was retransmitted).",
        discussion: """
            Runs until Ctrl-C, or until --count messages arrived. What was printed is recorded in \
            $SIMP_HOME/received/USER/DEVICE.jsonl, so a message the relay delivers again after a \
            crash is not printed twice; only a crash right between printing a line and recording \
            it prints that line once more. A lost relay is reconnected; simp listen exits 3 when a \
            newer session of its device took over, and 1 when the relay refuses a login again \
            (password changed, or the user locked: `login refused: ...`). \
            A file you sent through the relay (to someone offline) that reached a device of its \
            receiver is printed as `✓✓ file NAME (id N) reached bob's device phone: ...` (with \
            --json, {"event": "fileReceived", "fileId", "name", "user", "device", "text"}); the news \
            waits on the relay while no simp of yours listens.
            """)

    @OptionGroup var connection: ConnectionOptions

    @Flag(
        help: ArgumentHelp(
            "One JSON object per line: id, from, to, type, content, time, e2e, verified, device; end-to-end news as {\"event\": ...}.",
            discussion:
                "Each message says whether it came end-to-end encrypted (e2e), from which device (device, for direct messages) and whether you verified that device (verified; simp keys --with USER --confirm); keyChanged is true on the first message after the sender's safety number changed. End-to-end news (a safety number changed, a device of yours you do not know, a verified user's key changed, keys no one can use) comes as a line {\"event\": NAME, \"text\": ..., \"user\": ...}; without --json it goes to standard error."
        ))
    var json = false

    @Flag(
        name: .customLong("allow-plaintext"),
        help:
            "Also print messages that did not come end-to-end encrypted, marked (not end-to-end encrypted). Without it they are not shown: the relay can write such a message under anyone's name. Implied by --no-e2e."
    )
    var allowPlaintext = false

    @Option(help: "Exit 0 after printing this many messages; later ones are not taken (not receipted) and wait for the next run.")
    var count: Int?

    @Option(help: "Join this room first (repeat for several); its posts are shown as `#ROOM AUTHOR: text`.")
    var room: [String] = []

    @Option(
        help: ArgumentHelp(
            "Save files sent to you here (default $SIMP_HOME/downloads): `file: NAME (SIZE bytes, sha256 HASH) from USER saved to PATH`, or with --json {\"file\": {name, size, sha256, path}}. Names are sanitised and never overwrite a file; a transfer cut off resumes when simp listen starts again.",
            valueName: "dir"))
    var downloads: String?

    /// The exit status when a newer session of this device took over.
    static let takenOverStatus: Int32 = 3

    func validate() throws {
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
    }

    /// The record of what this user and device printed, when the device is this process's
    /// (its lock, with the outbox); nil, said on standard error, when it cannot be used.
    static func record(for configuration: ClientConfiguration) -> DeliveredRecord? {
        guard configuration.outbox != nil else { return nil }
        do {
            return try DeliveredRecord(home: SIMPHome.directory(), user: configuration.user, device: configuration.device)
        } catch {
            FileHandle.standardError.write(Data("simp: \(error); going on without it: a restart after a crash may print a message again\n".utf8))
            return nil
        }
    }

    func run() async throws {
        var printer: ListenService.Printer?
        // A message is printed before its receipt leaves (a receipt means the application has
        // it: docs/PROTOCOL.md §6.1), and one held behind a gap is receipted only once printed.
        // What was printed is recorded under $SIMP_HOME, so a restart after a crash does not
        // print again a message whose receipt the crash cut off (§6.4).
        let announcements = DownloadsBox()
        let client = try await connection.connect(configure: { configuration in
            // Receipts are batched (docs/PROTOCOL.md §6.1): a burst read at once is receipted in
            // one frame per sender. Each message is printed and recorded before its receipt
            // waits in a batch, so a kill during the wait costs only copies that the next run
            // finds in the record and skips.
            // After --count messages the client takes no more: the rest stay for the next run.
            configuration.deliveryLimit = count
            let printing = ListenService.Printer(
                limit: count, record: Self.record(for: configuration), allowPlaintext: allowPlaintext || connection.noE2E,
                format: { [json] in json ? MessageFormatting.jsonLine($0, origin: $1) : MessageFormatting.textLine($0, origin: $1) },
                printLine: { FileHandle.standardOutput.write(Data(($0 + "\n").utf8)) },
                warn: { FileHandle.standardError.write(Data("simp: \($0)\n".utf8)) })
            configuration.originHandler = { message, origin in
                // A file's announcement (end to end only: its key travels in it) is the
                // downloads' to take; the file is printed once saved.
                if message.fileId != 0, origin.endToEnd {
                    announcements.offer(message)
                    return true
                }
                return printing.print(message, origin: origin)
            }
            printer = printing
        })
        try startDownloads(client, into: announcements)
        Task { [json] in // end-to-end news: standard error, or JSON events with --json
            for await notice in client.endToEndNotices {
                if json {
                    FileHandle.standardOutput.write(Data((notice.jsonLine + "\n").utf8))
                } else if let line = notice.errorLine {
                    FileHandle.standardError.write(Data((line + "\n").utf8))
                }
            }
        }
        Task { [json] in // the relay's news that a file this user sent through it reached its receiver (✓✓)
            for await notice in client.notices {
                guard let news = FileReceivedNews(notice) else { continue }
                FileHandle.standardOutput.write(Data(((json ? news.jsonLine : news.line) + "\n").utf8))
            }
        }
        for room in room {
            do { _ = try await client.joinRoom(room) } catch {
                await client.close()
                fail("simp: cannot join #\(room): \(error)")
            }
        }
        if !json, count == nil {
            FileHandle.standardError.write(
                Data("listening as \(connection.user) (device \(client.configuration.device)) on \(connection.server); Ctrl-C to stop\n".utf8))
        }
        Task { // connection notices go to standard error, so --json output stays clean
            for await state in client.connectionStates.dropFirst(2) { // connecting, connected
                if state == .offline(reason: SIMPClient.closedReason) { break } // our own exit, not news
                if let line = MessageFormatting.stateLine(state) { FileHandle.standardError.write(Data((line + "\n").utf8)) }
                guard case .offline = state else { continue }
                switch await client.stopped {
                case .takenOver?: Foundation.exit(Listen.takenOverStatus)
                case .loginRefused?, .tokenExpired?: Foundation.exit(1) // said on the line above; retrying cannot help
                case nil: break
                }
            }
        }
        Task { // what an earlier simp on this device left undelivered
            let (resent, unreadable) = try await client.resendOutbox()
            for name in unreadable {
                FileHandle.standardError.write(Data("simp: outbox: \(name) could not be read; set aside as \(name).bad\n".utf8))
            }
            if !resent.isEmpty {
                FileHandle.standardError.write(Data("resending \(resent.count) message(s) left in the outbox by an earlier simp\n".utf8))
            }
            for (message, result) in resent {
                let outcome = try await result.get()
                FileHandle.standardError.write(
                    Data("earlier message \(message.messageId) to \(message.toUser): \(MessageFormatting.outcomeText(outcome))\n".utf8))
            }
        }
        let listen = ListenService(client: client, count: count)
        // `--count` ends the listen service normally, which shuts the group down cleanly.
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: listen, successTerminationBehavior: .gracefullyShutdownGroup)],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: Logger(label: "simp.lifecycle")))
        try await group.run()
        if let refused = printer?.refusedCount, refused > 0 {
            FileHandle.standardError.write(
                Data("simp: \(refused) message\(refused == 1 ? "" : "s") refused: not end-to-end encrypted (--allow-plaintext shows them)\n".utf8))
        }
    }
}
