import ArgumentParser
import Foundation
import NIOCore
import SIMPChat
import SIMPClient
import SIMPCore

struct SIMPCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simp",
        abstract: "The SIMP messaging client.",
        discussion: """
            Start a relay with scripts/run-server, then `simp chat --user alice` in one terminal and \
            `simp chat --user bob --to alice` in another (or `simp listen` and `simp send`).

            Settings can live in $SIMP_HOME/config.toml or ~/.config/simp/config.toml: top-level \
            keys named like the shared flags (server, user, password-file, token-file, token-command, tls, ca, device, no-e2e, presence, udp-port, \
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
            "Send this file, end to end encrypted, in chunks over the datagram path (progress on standard error). Exits 0 once the receiver's device has the whole file and its SHA-256 matched (simp listen saves it). If the receiver is offline (or has several devices), the file is uploaded to the relay, which holds it for the receiver's devices: simp send then exits 0 once the relay holds it whole and says so on standard error; the ✓✓ (a device of the receiver has it) shows later in simp chat or simp listen, or add --wait-received. With --room, to each member who reads the room's posts (the members offline share one upload); exits 0 once every one has it or the relay holds it for them.",
            valueName: "path"))
    var file: String?

    @Flag(
        help:
            "With --to USER --file: when the relay holds the file for a receiver who is offline, wait until a device of the receiver has it whole (✓✓) and print that, instead of exiting once the relay holds it. Ctrl-C stops waiting; the news then waits on the relay for simp listen or simp chat."
    )
    var waitReceived = false

    @Argument(help: "The message text; - reads it from standard input.")
    var text: String = ""

    func validate() throws {
        if file != nil {
            guard (to == nil) != (room == nil), image == nil, audio == nil, !lines, text.isEmpty else {
                throw ValidationError("--file goes with --to USER or --room ROOM only (no text, --image, --audio or --lines)")
            }
            guard !join || room != nil else { throw ValidationError("--join needs --room") }
            guard !waitReceived || to != nil else { throw ValidationError("--wait-received goes with --to USER --file") }
            return
        }
        guard !waitReceived else { throw ValidationError("--wait-received goes with --to USER --file") }
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
        if let file, let room { return try await sendFile(file, toRoom: room, join: join) }
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
