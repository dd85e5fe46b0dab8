import ArgumentParser
import Foundation
import Logging
import NIOCore
import SIMPChat
import SIMPClient
import SIMPCore
import ServiceLifecycle

struct SIMPCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simp",
        abstract: "The SIMP messaging client.",
        discussion: """
            Start a relay with scripts/run-server, then `simp chat --user alice` in one terminal and \
            `simp chat --user bob --to alice` in another (or `simp listen` and `simp send`).

            Settings can live in $SIMP_HOME/config.toml or ~/.config/simp/config.toml: top-level \
            keys named like the shared flags (server, user, password-file, token-file, token-command, tls, ca, device, no-e2e, udp-port, \
            log-level; a flag as `tls = true`) and a \
            [chat] table (to, history-dir, color, colors, read-receipts, bell). Flags override the file.
            """,
        version: SIMPVersion.current,
        subcommands: [Chat.self, Send.self, Listen.self, Keys.self, Devices.self])
}

struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send one message and wait for the receiver's receipt.",
        discussion: """
            Prints the message id, then `delivered in N ms` when the receipt arrives, and exits 0. \
            If the recipient is offline (but known to the relay), the relay stores the message and \
            `stored: ...` is printed instead (also exit 0): it is delivered when the recipient connects. \
            A recipient with several devices, one of them online, gets `sent to NAME's devices: ...` \
            (exit 0): the relay delivers it to each device. \
            Exits 1 with a one-line error if the relay is unreachable, the recipient is unknown, \
            or no receipt arrives within the time limit (5 minutes). A message still without a \
            receipt after 5 s is reported on standard error (`still trying`): the relay or the network \
            is slow, or the recipient's inbox is full and refuses it for now. Where UDP is blocked, \
            messages go over the control connection instead (said once on standard error).

            The session only sends: it never takes messages stored for your user. A message whose \
            outcome is not known when simp send exits (connection lost, Ctrl-C, a crash) stays in the \
            outbox ($SIMP_HOME/outbox) and is resent, with its id, by the next simp of your user on \
            this device; simp send says so on standard error (`resending 1 message ...`).
            """)

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "The recipient's user id.")
    var to: String?

    @Option(help: "Post to this room instead (you must be a member; see --join). Members get it from #ROOM.")
    var room: String?

    @Flag(help: "With --room: join the room first (creating it if it has no members).")
    var join = false

    @Option(help: "Send an IMAGE message with this URL instead of text.")
    var image: String?

    @Option(help: "Display scale for --image.")
    var scale: Float = 1

    @Option(help: "Send an AUDIO message with this URL (a link to the recording) instead of text.")
    var audio: String?

    @Flag(
        help:
            "Send each line of standard input as its own message as soon as it is read (empty lines are skipped), in order; `tail -f LOG | simp send --lines` streams. Each outcome is printed when it comes; exits at end of input once every outcome is known."
    )
    var lines = false

    @Option(
        help: ArgumentHelp(
            "Send this file, end to end encrypted, in chunks over the datagram path (progress on standard error). Exits 0 once the receiver's device has the whole file and its SHA-256 matched; the receiver must be online (simp listen saves it).",
            valueName: "path"))
    var file: String?

    @Argument(help: "The message text; - reads it from standard input.")
    var text: String = ""

    func validate() throws {
        if file != nil {
            guard to != nil, room == nil, image == nil, audio == nil, !lines, text.isEmpty else {
                throw ValidationError("--file goes with --to USER only (no room, text, --image, --audio or --lines)")
            }
            return
        }
        guard (to == nil) != (room == nil) else { throw ValidationError("give either --to USER or --room ROOM") }
        guard to?.isEmpty != true, room?.isEmpty != true else { throw ValidationError("--to and --room must not be empty") }
        guard !join || room != nil else { throw ValidationError("--join needs --room") }
        guard image == nil || audio == nil else { throw ValidationError("give --image or --audio, not both") }
        if lines {
            guard image == nil, audio == nil, text.isEmpty else {
                throw ValidationError("--lines reads the text from standard input: no TEXT, --image or --audio")
            }
        } else {
            guard image != nil || audio != nil || !text.isEmpty else {
                throw ValidationError("give the message TEXT (- for standard input), --image URL, --audio URL or --lines")
            }
        }
    }

    /// The messages to send: one, or with `--lines` one per line of standard input, each as
    /// soon as its line is read (`tail -f build.log | simp send --lines` sends as the log grows).
    func messages(to: String) -> AsyncStream<SIMPMessage> {
        AsyncStream { continuation in
            if let image {
                var message = SIMPMessage(kind: .image, toUser: to)
                message.imageURL = image
                message.imageScale = scale
                continuation.yield(message)
                continuation.finish()
            } else if let audio {
                continuation.yield(SIMPMessage(kind: .audio, toUser: to, content: audio))
                continuation.finish()
            } else if !lines && text != "-" {
                continuation.yield(SIMPMessage(kind: .text, toUser: to, content: text))
                continuation.finish()
            } else {
                // Reading standard input blocks: on a thread of its own, not a concurrency thread.
                Thread.detachNewThread { [lines] in
                    if lines {
                        while let line = readLine(strippingNewline: true) {
                            if !line.isEmpty { continuation.yield(SIMPMessage(kind: .text, toUser: to, content: line)) }
                        }
                    } else {
                        var body = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
                        while body.hasSuffix("\n") || body.hasSuffix("\r") { body.removeLast() }
                        if !body.isEmpty { continuation.yield(SIMPMessage(kind: .text, toUser: to, content: body)) }
                    }
                    continuation.finish()
                }
            }
        }
    }

    func run() async throws {
        if let file, let to { return try await sendFile(file, to: to) }
        let client = try await connection.connect(sendOnly: true)
        let signals = Self.reportLostOnSignals(client)
        defer { for signal in signals { signal.cancel() } }
        let earlier = try await resendOutbox(client)
        if let room, join {
            do { _ = try await client.joinRoom(room) } catch {
                await client.close()
                fail("simp: cannot join #\(room): \(error)")
            }
        }
        let to = self.to ?? SIMPClient.roomAddress(room!)
        let delays = Task { // a long wait is said, once per message, not sat through in silence
            for await case .delayed(let id, let to, let waitedMillis) in client.notices {
                let why =
                    await client.datagramPath == .control
                    ? "over the control connection, UDP being blocked: the relay or the connection is slow, or \(to)'s inbox is full"
                    : "the relay or the network is slow, or \(to)'s inbox is full"
                FileHandle.standardError.write(
                    Data(
                        ("simp: message \(id) to \(to): no receipt after \(waitedMillis / 1000) s "
                            + "(\(why)); still trying. Ctrl-C leaves it in the outbox for the next simp\n").utf8))
            }
        }
        defer { delays.cancel() }
        let waiting = Task { // end-to-end news, and a message to a user without keys yet waits: said, not sat through in silence
            for await notice in client.endToEndNotices {
                guard case .waitingForFirstLogin = notice else {
                    if let line = notice.errorLine { FileHandle.standardError.write(Data((line + "\n").utf8)) }
                    continue
                }
                FileHandle.standardError.write(Data("simp: \(notice); Ctrl-C leaves it in the outbox for the next simp\n".utf8))
            }
        }
        defer { waiting.cancel() }
        let paths = Task { // UDP blocked is said once, and is not the relay's fault
            for await path in client.datagramPaths where path == .control {
                FileHandle.standardError.write(Data("simp: UDP is blocked on this network; messages go over the control connection\n".utf8))
                break
            }
        }
        defer { paths.cancel() }
        // Each message is submitted as soon as it is read and its outcome printed when it comes,
        // so a long-running `--lines` input is sent line by line.
        let (sent, failures) = try await withThrowingTaskGroup(of: String?.self) { group in
            var sent = 0
            for await message in messages(to: to) {
                let id: UInt64, outcome: EventLoopFuture<SendResult>
                do { (id, outcome) = try await client.submit(message) } catch let error as SIMPClientError {
                    if case .notEncryptable = error {} else { throw error }
                    await Self.reportLost(client)
                    await client.close()
                    fail("simp: \(error)") // a verified user's key changed, or keys cannot be kept: said, exit 1
                }
                sent += 1
                printLine("message \(id) to \(to)")
                group.addTask { [lines] in
                    let result = try await outcome.get()
                    let inOutbox = await !client.messagesKeptInMemoryOnly.contains { $0.messageId == id }
                    let line = outcomeLine(id: id, to: to, result, numbered: lines, inOutbox: inOutbox)
                    if let failure = line.failure {
                        if lines { FileHandle.standardError.write(Data("simp: \(failure)\n".utf8)) }
                        return failure
                    }
                    printLine(line.text)
                    return nil
                }
            }
            var failures: [String] = []
            for try await failure in group { if let failure { failures.append(failure) } }
            return (sent, failures)
        }
        await reportResent(earlier)
        await Self.reportLost(client)
        await client.close()
        if sent == 0 { fail("simp: nothing to send: standard input was empty") }
        if lines, !failures.isEmpty { fail("simp: \(failures.count) of \(sent) messages not delivered") }
        if let failure = failures.last { fail("simp: \(failure)") }
    }

    /// Says on standard error which messages are lost now: not delivered, and not in the
    /// outbox because it could not be written.
    static func reportLost(_ client: SIMPClient) async {
        for line in MessageFormatting.lostAtExit(await client.messagesKeptInMemoryOnly) {
            FileHandle.standardError.write(Data("simp: \(line)\n".utf8))
        }
    }

    /// Ctrl-C and SIGTERM end simp send (status 128 + the signal, as before) after
    /// `reportLost`: what is in the outbox stays there for the next simp.
    private static func reportLostOnSignals(_ client: SIMPClient) -> [DispatchSourceSignal] {
        [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                Task {
                    await reportLost(client)
                    Foundation.exit(128 + number)
                }
            }
            source.resume()
            return source
        }
    }

    /// Writes `line` to standard output at once (seen even when a Ctrl-C ends the wait for an
    /// outcome). Not print and fflush(nil): that flush takes every stream's lock, stdin's too,
    /// which the `--lines` reader holds while it waits for the next line.
    private func printLine(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// Resubmits what earlier runs on this device left in the outbox, saying so on standard error.
    private func resendOutbox(_ client: SIMPClient) async throws -> [(message: SIMPMessage, result: EventLoopFuture<SendResult>)] {
        let (resent, unreadable) = try await client.resendOutbox()
        for name in unreadable { FileHandle.standardError.write(Data("simp: outbox: \(name) could not be read; set aside as \(name).bad\n".utf8)) }
        if !resent.isEmpty {
            let many = resent.count > 1
            FileHandle.standardError.write(Data("resending \(resent.count) message\(many ? "s" : "") left in the outbox by an earlier simp\n".utf8))
        }
        return resent
    }

    /// Says on standard error what became of the resent messages (the exit status is about
    /// this run's own messages).
    private func reportResent(_ resent: [(message: SIMPMessage, result: EventLoopFuture<SendResult>)]) async {
        for (message, result) in resent {
            let id = message.messageId
            guard let outcome = try? await result.get() else { continue }
            FileHandle.standardError.write(Data("earlier message \(id) to \(message.toUser): \(MessageFormatting.outcomeText(outcome))\n".utf8))
        }
    }

    /// What to print for one message's outcome (`failure` for standard error).
    private func outcomeLine(id: UInt64, to: String, _ result: SendResult, numbered: Bool, inOutbox: Bool) -> (text: String, failure: String?) {
        let prefix = numbered ? "message \(id): " : ""
        switch result {
        case .delivered(_, let latency, let attempts):
            let millis = Double(latency.nanoseconds) / 1_000_000
            return (prefix + String(format: "delivered in %.1f ms", millis) + (attempts > 1 ? " (\(attempts) transmissions)" : ""), nil)
        case .failed(_, let failure):
            return ("", "message \(id) not delivered: \(failure)")
        case .connectionLost where !inOutbox:
            return ("", "message \(id): connection to the relay was lost before the receipt arrived; it is not in the outbox")
        case .connectionLost:
            return (
                "",
                "message \(id): connection to the relay was lost before the receipt arrived; "
                    + "it stays in the outbox and the next simp of \(connection.user) on this device resends it"
            )
        case .stored where room != nil:
            return (prefix + "posted to \(to); members get it now, or when they connect", nil)
        case .stored(_, receiverOnline: true):
            return (
                prefix + "sent to \(to)'s devices: \(to) is online; the relay delivers it to each of \(to)'s devices "
                    + "(now to those connected, the others as they connect)", nil
            )
        case .stored:
            return (prefix + "stored: the relay holds it for \(to) and delivers it to each of \(to)'s devices as it connects", nil)
        }
    }
}

struct Listen: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Wait for messages and print each one (once, however often it was retransmitted).",
        discussion: """
            Runs until Ctrl-C, or until --count messages arrived. What was printed is recorded in \
            $SIMP_HOME/received/USER/DEVICE.jsonl, so a message the relay delivers again after a \
            crash is not printed twice; only a crash right between printing a line and recording \
            it prints that line once more. A lost relay is reconnected; simp listen exits 3 when a \
            newer session of its device took over, and 1 when the relay refuses a login again \
            (password changed, or the user locked: `login refused: ...`).
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
                if message.fileId != 0, origin.endToEnd, let downloads = announcements.downloads {
                    Task { await downloads.offered(message) }
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

struct Chat: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Chat interactively: an input line at the bottom, messages above it, delivery ticks.",
        discussion: """
            Type `@NAME TEXT` to send TEXT to NAME (who then stays the current peer, shown in the \
            prompt), or `/to NAME` and then plain lines. `/image URL [SCALE]` sends an image link, \
            `/audio URL` an audio link, \
            `/retry` resends failed messages, `/history [N]` shows older messages, `/help` lists \
            everything, `/quit` (or Ctrl-D on an empty line, or Ctrl-C) leaves. irssi's `/msg NAME TEXT`, \
            `/query NAME`, `/me ACTION`, `/part` and `/clear` work too. Without --to, the chat starts with \
            whoever you talked to when you last left, or, with no one chosen, replies to the first \
            person who writes. If the relay refuses the login for good (say, your account is locked), \
            messages you type wait in the outbox and `/reconnect` tries again.

            Each message you send is marked … pending, ✓ sent, ✓✓ delivered (the receiver's receipt \
            arrived) or ✗ failed with the reason. A message to a user who is offline is marked \
            ✓ (stored): the relay keeps it and delivers it when they connect, and the mark turns ✓✓. \
            When the receiver has seen it, it turns ✓✓ read (your own read markers: --no-read-receipts). \
            `/join ROOM`, `/leave`, `/members` for group chat; `/who [NAME...|#ROOM]` for presence. \
            The line editor knows ←/→, Home/End, Ctrl-A/E, \
            Backspace/Delete, Ctrl-U/K/W, ↑/↓ for earlier lines, Ctrl-L to redraw, Tab to complete \
            names, #rooms and /commands, PageUp/PageDown to scroll back through the session. \
            Messages in other conversations are counted in the prompt ([carol 2] bob>) and ring the \
            terminal bell (--no-bell); after the history shown at start, a "— new —" line marks \
            the first message that arrives. A room post's mark counts its members who have it (✓✓ 2/2).

            If the relay goes away, `simp chat` says so and reconnects by itself (waiting 1, 2, 4 … s); \
            messages typed meanwhile stay pending (…) and are sent once it is back. Messages not yet \
            delivered when you leave stay in the outbox ($SIMP_HOME/outbox; /quit asks once) and the \
            next simp of your user on this device resends them. `/retry` also resends what failed in \
            earlier sessions.

            History is kept per user in DIR/USER.jsonl (default $SIMP_HOME/history, or \
            ~/.simp/history) and the last messages are shown on start. A message is written to \
            the history before its receipt goes back, so one the relay delivers again after a crash \
            (say kill -9) is recognised and not shown twice.

            When stdin is not a terminal, lines are read from it and carried out as if typed, and \
            plain lines are printed (no colours, no cursor movement). At end of input `simp chat` \
            waits up to 10 s for messages in flight, then exits 0 if every message was delivered \
            (or stored for an offline receiver) and 1 otherwise.
            """)

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "Start talking to this user (you can switch with /to NAME or @NAME; default: whoever you talked to last).")
    var to: String?

    @Flag(name: .customLong("no-color"), help: "No colours (also off when NO_COLOR is set or stdout is not a terminal).")
    var noColor = false

    @Flag(name: .customLong("no-read-receipts"), help: "Do not tell senders when you have seen their messages.")
    var noReadReceipts = false

    @Flag(name: .customLong("no-bell"), help: "Do not ring the terminal bell when a message arrives from someone other than the current peer.")
    var noBell = false

    @Option(
        help: ArgumentHelp(
            "Colours to change, as TONE=COLOUR pairs: peer=cyan,me=bold yellow,link=4;34.",
            discussion:
                "Tones: dim, bold, peer, me, success, warning, failure, link. Colours: black, red, green, yellow, blue, magenta, cyan, white, bold, dim, underline, none, or SGR codes."
        ))
    var colors: String?

    @Option(name: .customLong("history-dir"), help: "Directory for the history files (default $SIMP_HOME/history or ~/.simp/history).")
    var historyDir: String?

    func validate() throws {
        if let to, to.isEmpty { throw ValidationError("--to must not be empty") }
        if let colors { do { _ = try Palette(changing: colors) } catch { throw ValidationError("--colors: \(error)") } }
    }

    func run() async throws {
        let log = ChatLog()
        // Loaded before connecting: each incoming message is appended to it before its receipt
        // leaves, and one it has already (after a restart) is receipted, not shown again.
        let history = ChatHistory(
            directory: historyDir.map { URL(fileURLWithPath: $0) } ?? HistoryStore.defaultDirectory(), user: connection.user)
        var leftInOutbox: (messages: [SIMPMessage], unreadable: [String])?
        let client = try await connection.connect(
            logHandler: { label, level in log.handler(label: label, level: level) },
            configure: {
                $0.messageHandler = { history.recordIncoming($0) }
                leftInOutbox = $0.outbox?.load() // before this client sends anything of its own
            })
        var options = ChatController.Options(peer: to)
        options.outboxAtStart = leftInOutbox ?? ([], [])
        options.colors = !noColor
        options.readReceipts = !noReadReceipts
        options.bell = !noBell
        if let colors { options.palette = try Palette(changing: colors) }
        options.log = log
        let status = await ChatController(client: client, history: history, options: options).run()
        if status != 0 { throw ExitCode(status) }
    }
}
