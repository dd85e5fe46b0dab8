import ArgumentParser
import Foundation
import SIMPChat
import SIMPClient
import SIMPCore

struct Chat: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Chat interactively: an input line at the bottom, messages above it, delivery ticks.",
        discussion: """
            Type `@NAME TEXT` to send TEXT to NAME (who then stays the current peer, shown in the \
            prompt), or `/to NAME` and then plain lines. `/file PATH` sends a file (end to end encrypted, \
            a progress line in place, then ✓✓ once the receiver has it whole and its SHA-256 matched; \
            a path with spaces can be quoted or pasted as it is), `/image PATH` a PNG, JPEG or GIF \
            image file (shown with its width×height), `/image URL [SCALE]` an image link, \
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

    @Option(help: "Save files sent to you here (default $SIMP_HOME/downloads); names are sanitised and never overwrite a file.")
    var downloads: String?

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
        options.downloads = downloads
        let status = await ChatController(client: client, history: history, options: options).run()
        if status != 0 { throw ExitCode(status) }
    }
}
