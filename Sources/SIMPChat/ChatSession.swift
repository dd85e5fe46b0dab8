import SIMPClient
import SIMPCore

/// Something the session needs done outside it.
public enum ChatEffect: Equatable, Sendable {
    /// Submit `message` to the client and report back with `submitted` and `resolved`.
    case send(ref: Int, SIMPMessage)
    /// Submit a frame of the end-to-end layer an earlier session left in the outbox, as it
    /// is: nothing is shown or recorded, and its outcome is not reported.
    case resubmit(SIMPMessage)
    /// Append to the history file (a message this user sent; `ChatHistory` records received ones).
    case record(HistoryEntry)
    case recordStatus(messageId: UInt64, status: String)
    /// Record in the history what became of the file received in entry `messageId` from `from`.
    case recordFile(messageId: UInt64, from: String, HistoryFile)
    /// Carry out a room request with the client and report back with `roomAnswered`.
    case room(ChatRoomRequest)
    /// Tell `sender` its messages up to `upTo` were seen (a read marker).
    case markRead(from: String, upTo: UInt64)
    /// Tell `to` this user is typing.
    case typing(to: String)
    /// Ask the presence of `users` (and follow their changes); `show` prints the answer (`/who`).
    case who(users: [String], room: String?, show: Bool)
    /// Compute the safety numbers with `peer`'s devices and report back with `safetyNumbersAnswered`.
    case safetyNumbers(with: String)
    /// Mark `peer` verified and report back with `verifiedConfirmed`.
    case confirmVerified(String)
    /// Accept `peer`'s changed key (no longer verified) and report back with `keyChangeAccepted`.
    case acceptKeyChange(String)
    /// Look at the file at `path` (exists, readable, its size; with `image`, a PNG, JPEG or GIF
    /// and its dimensions) and report back with `fileChecked`.
    case checkFile(path: String, to: String, image: Bool)
    /// Send `file` to `to` (a `FileSend`), reporting with `fileProgress` and `resolved(ref:)`.
    case sendFile(ref: Int, ChatFile, to: String)
    /// Call `clockTicked()` after this many milliseconds (a typing indicator expires then).
    case wake(afterMillis: Int64)
    /// Connect again after the client stopped (`/reconnect`).
    case reconnect
    /// Call `drainTimedOut()` if messages are still unresolved after a while.
    case startDrainTimer
    /// Leave with this exit status.
    case quit(status: Int32)
}

/// Time for the session: now, and how a timestamp is shown.
public struct ChatClock: Sendable {
    public var now: @Sendable () -> Int64
    public var format: @Sendable (Int64) -> String

    public init(now: @escaping @Sendable () -> Int64, format: @escaping @Sendable (Int64) -> String) {
        self.now = now
        self.format = format
    }
}

/// The chat as a pure state machine: keys, lines, incoming messages, send outcomes and
/// connection changes go in; terminal output (`takeOutput()`) and effects come out. The
/// `ChatController` does the I/O around it.
public struct ChatSession: Sendable {
    public let user: String
    /// Who plain lines go to.
    public internal(set) var peer: String?
    public internal(set) var editor = LineEditor()
    public internal(set) var screen: Screen
    public internal(set) var outgoing = OutgoingTracker()
    public internal(set) var connection: ConnectionState = .connecting
    var history: [HistoryEntry]
    /// Index of the oldest history entry shown so far.
    var historyShownFrom: Int
    var draining = false
    /// `/quit` already said that undelivered messages stay in the outbox: the next one leaves.
    var quitWarned = false
    /// Some messages of this session are not in the outbox (it could not be written): those
    /// not delivered at exit are lost, and `/quit` says so instead of "sent next time".
    public var undeliveredAreLostAtExit = false
    /// Whether the chat already said that messages wait for receipts (reset once one settles).
    var slowSpellReported = false
    var hasConnected = false
    /// How the client's datagrams go (docs/PROTOCOL.md §5.5), as it last said.
    public internal(set) var datagramPath: DatagramPath = .udp
    /// Whether the chat already said that UDP is blocked (said once a session).
    var saidUDPBlocked = false
    var output = ""
    let clock: ChatClock

    /// Whether `peer` is who the user talked to when the last session ended (not `--to`).
    public var peerIsFromLastTime = false
    /// The device this session runs on, shown when it connects (nil: not shown).
    public var device: String?
    /// Whether read markers are sent when the user has seen a conversation (`--no-read-receipts` turns them off).
    public var sendsReadMarkers = true
    /// Newest unseen message id per peer (read markers are sent when the user switches to it).
    var unread: [String: UInt64] = [:]
    /// Messages that arrived in each conversation other than the current one since the user
    /// last talked in it (shown in the prompt).
    public internal(set) var unreadCounts: [String: Int] = [:]
    /// Ring the terminal bell when a direct message arrives from someone other than the current
    /// peer (`--no-bell` turns it off).
    public var rings = true
    /// A directory's entries (directories ending in `/`), for Tab after `/file ` and `/image `
    /// (`PathCompletion`); nil: paths are not completed. The controller reads the disk.
    public var listDirectory: (@Sendable (String) -> [String]?)?
    /// Names and rooms seen in this session, for Tab completion.
    public internal(set) var knownNames: Set<String> = []
    /// Whether the "— new —" line still has to go before the first message received after the
    /// history shown at start.
    var newMarkerPending = false
    /// When each peer was last reported typing (ms, chat clock).
    var typingSince: [String: Int64] = [:]
    /// Peers marked verified whose key changed since: their lines are marked until `/verify NAME --confirm`.
    var keyChangedPeers: Set<String> = []
    var lastTypingSent: Int64 = .min
    /// Each room's members as the relay listed them last (`membersLearned`).
    var roomMembers: [String: Set<String>] = [:]
    /// Room progress that came before the client said which message it is for (`submitted`).
    var earlyRoomProgress: [UInt64: DeliveryStatus] = [:]
    /// Files whose receiver had them before the chat learned the relay held them (`fileStored`).
    var filesReceivedEarly: Set<UInt64> = []
    /// Room files the relay holds for some members, by file id (`roomFileHeld`).
    var roomFilesWaiting: [UInt64: RoomFileWaiting] = [:]
    /// Members whose news that they have a file came before its line knew the id, by file id.
    var roomFileNewsEarly: [UInt64: Set<String>] = [:]
    /// Lines counting messages asked for or sent again, per peer device (`endToEndNoticed`).
    var recoveryLines: [String: RecoveryLine] = [:]
    /// How long a typing indicator is shown, and how often one is sent, in ms.
    public static let typingWindow: Int64 = 4000

    public init(user: String, peer: String?, screen: Screen, history: [HistoryEntry] = [], clock: ChatClock) {
        self.user = user
        self.peer = peer
        self.screen = screen
        self.history = history
        self.historyShownFrom = history.count
        self.clock = clock
        for entry in history { learnNames(entry.from, entry.to) }
        if let peer { learnNames(peer) }
    }

    /// Output produced since the last call.
    public mutating func takeOutput() -> String {
        defer { output = "" }
        return output
    }

    /// The first screen: recent history (interactive only), then the messages an earlier
    /// session left in the outbox, resent (`resend`; their history lines are not repeated),
    /// and the input line. Returns the effects of the resend.
    @discardableResult
    public mutating func start(showingHistory count: Int = 10, resending: [SIMPMessage] = []) -> [ChatEffect] {
        if screen.interactive {
            if !history.isEmpty {
                let shown = min(count, history.count)
                notice("last \(shown) of \(history.count) messages; /history shows older ones", .dim)
                showHistory(count: shown, except: Set(resending.map(\.messageId)))
                newMarkerPending = true
            }
            let talking = peer.map { "talking to \($0)" + (peerIsFromLastTime ? " (as when you left; /to NAME to change)" : "") }
            notice("you are \(user); \(talking ?? "@NAME TEXT to talk to someone"); /help for commands", .dim)
        }
        let effects = resend(resending)
        output += screen.draw(inputLine)
        return effects
    }

    // MARK: Input

    /// Applies keys typed in the terminal.
    public mutating func handle(_ keys: [Key]) -> [ChatEffect] {
        var effects: [ChatEffect] = []
        for key in keys {
            switch key {
            case .tab:
                complete()
                continue
            case .pageUp:
                output += screen.pageUp(inputLine)
                continue
            case .pageDown:
                output += screen.pageDown(inputLine)
                effects += markSeenIfAtNewest()
                continue
            default: break
            }
            switch editor.handle(key) {
            case .edited:
                output += screen.draw(inputLine)
            case .submitted(let line):
                output += screen.follow(inputLine)
                effects += markSeenIfAtNewest()
                effects += submitLine(line)
            case .interrupted, .endOfInput: effects += quitAsking()
            case .redraw:
                output += screen.redraw(inputLine)
            }
            if effects.contains(where: { if case .quit = $0 { return true } else { return false } }) { break }
        }
        return effects + typingEffect() // only while a line is left half-typed
    }

    /// Carries out one line (typed and submitted, or read from a non-terminal stdin).
    public mutating func submitLine(_ line: String) -> [ChatEffect] {
        switch ChatCommand.parse(line) {
        case .nothing:
            output += screen.draw(inputLine)
            return []
        case .say(let text, let to):
            var effects: [ChatEffect] = []
            if let to, to != peer {
                peer = to
                effects = peerChosen()
            }
            return sendToPeer(SIMPMessage(kind: .text, content: text), orType: "@NAME TEXT") + effects
        case .file(let path, let image):
            return fileAsked(path: path, image: image)
        case .image(let url, let scale):
            var message = SIMPMessage(kind: .image)
            message.imageURL = url
            message.imageScale = scale
            return sendToPeer(message)
        case .audio(let url):
            return sendToPeer(SIMPMessage(kind: .audio, content: url))
        case .action(let action):
            return sendToPeer(SIMPMessage(kind: .text, content: Self.actionPrefix + action), orType: "/msg NAME TEXT")
        case .clear:
            output += screen.clear(inputLine)
            return []
        case .reconnect:
            return reconnectAsked()
        case .switchPeer(let name):
            peer = name
            notice("talking to \(name)", .dim)
            return peerChosen()
        case .who(let names):
            let users = names.isEmpty ? peer.map { [$0] } ?? [] : names
            if let room = users.first.flatMap({ $0.hasPrefix("#") ? String($0.dropFirst()) : nil }) {
                return [.who(users: [], room: room, show: true)]
            }
            guard !users.isEmpty else {
                notice("usage: /who NAME... or /who #ROOM (default: the current peer)", .failure)
                return []
            }
            return [.who(users: users, room: nil, show: true)]
        case .retry:
            return retryFailures()
        case .history(let count):
            showOlderHistory(count: count ?? 20)
            return []
        case .join(let room):
            return [.room(.join(room))]
        case .leave(let room):
            guard let room = room ?? currentRoom else { return askWhichRoom("/leave") }
            return [.room(.leave(room))]
        case .members(let room):
            guard let room = room ?? currentRoom else { return askWhichRoom("/members") }
            return [.room(.members(room))]
        case .admit(let user, let room):
            guard let room = room ?? currentRoom else { return askWhichRoom("/admit \(user)") }
            return [.room(.admit(room, user: user))]
        case .status:
            showConnectionStatus()
            return []
        case .verify(let name):
            guard let name = name ?? peer, !RelayCore.isRoomAddress(name) else {
                notice("usage: /verify NAME (a person; default: the current peer)", .failure)
                return []
            }
            return [.safetyNumbers(with: name)]
        case .confirmVerified(let name):
            guard let name = name ?? peer, !RelayCore.isRoomAddress(name) else {
                notice("usage: /verify NAME --confirm (a person; default: the current peer)", .failure)
                return []
            }
            return [.confirmVerified(name)]
        case .acceptKeyChange(let name):
            guard let name = name ?? peer, !RelayCore.isRoomAddress(name) else {
                notice("usage: /verify NAME --accept (a person; default: the current peer)", .failure)
                return []
            }
            return [.acceptKeyChange(name)]
        case .help:
            for line in ChatCommand.helpLines { notice(line, .dim, prefix: "") }
            return []
        case .quit:
            return quitAsking()
        case .invalid(let reason):
            notice(reason, .failure)
            return []
        }
    }

    /// The input ended (Ctrl-D, or EOF on a non-terminal stdin). Without a terminal, waits for
    /// the outcome of messages still in flight first.
    public mutating func endOfInput() -> [ChatEffect] {
        guard !screen.interactive, outgoing.unresolvedCount > 0 else { return quit(status: exitStatus) }
        draining = true
        return [.startDrainTimer]
    }

    /// Messages were still unresolved when the drain timer fired.
    public mutating func drainTimedOut() -> [ChatEffect] {
        guard draining else { return [] }
        notice("gave up waiting for the outcome of \(outgoing.unresolvedCount) message(s)", .failure)
        return quit(status: 1)
    }

    /// The terminal was resized.
    public mutating func resize(width: Int, height: Int) {
        output += screen.resize(width: width, height: height, input: inputLine)
    }

    /// A typing indicator for the current peer, at most one per `typingWindow`.
    mutating func typingEffect() -> [ChatEffect] {
        guard let peer, !RelayCore.isRoomAddress(peer), !editor.text.isEmpty, !editor.text.hasPrefix("/") else { return [] }
        let now = clock.now()
        guard lastTypingSent == .min || now - lastTypingSent >= Self.typingWindow else { return [] }
        lastTypingSent = now
        return [.typing(to: peer)]
    }

    mutating func askWhichRoom(_ command: String) -> [ChatEffect] {
        notice("which room? type \(command) ROOM, or /join ROOM first", .failure)
        return []
    }

    /// The room the current peer names, if it is one.
    var currentRoom: String? {
        guard let peer, peer.hasPrefix("#") else { return nil }
        return String(peer.dropFirst())
    }

    // MARK: Output

    var isConnected: Bool {
        if case .connected = connection { return true }
        return false
    }

    /// The prompt and what is being typed.
    public var inputLine: InputLine {
        var prompt = StyledText()
        switch connection {
        case .connected: break
        case .connecting: prompt = StyledText("[connecting] ", .warning)
        case .reconnecting: prompt = StyledText("[reconnecting] ", .warning)
        case .offline: prompt = StyledText("[offline] ", .failure)
        }
        let elsewhere = unreadCounts.filter { $0.key != peer }.sorted { $0.key < $1.key }
        if !elsewhere.isEmpty {
            prompt = prompt + StyledText("[" + elsewhere.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + "] ", .warning)
        }
        prompt = prompt + StyledText(peer ?? "", .peer)
        if let peer, let since = typingSince[peer], clock.now() - since < Self.typingWindow {
            prompt = prompt + StyledText(" (typing…)", .dim)
        }
        prompt = prompt + StyledText("> ", .bold)
        return InputLine(prompt: prompt, text: editor.text, cursor: editor.cursor)
    }

    /// 1 if a message was neither delivered nor stored for an offline receiver (and not
    /// resent), 0 otherwise.
    var exitStatus: Int32 {
        outgoing.messages.contains {
            !$0.status.isDelivered && !$0.status.isInRelayCustody && $0.status != .noOtherMembers && !$0.retried
        } ? 1 : 0
    }

    /// Sends `message` to the current peer, or says how to choose one.
    mutating func sendToPeer(_ message: SIMPMessage, orType alternative: String? = nil) -> [ChatEffect] {
        guard let peer else {
            notice("no one to send to: type " + (alternative.map { "\($0), or " } ?? "") + "/to NAME first", .failure)
            return []
        }
        var message = message
        message.toUser = peer
        unreadCounts[peer] = nil
        return send(message)
    }

    mutating func send(_ message: SIMPMessage) -> [ChatEffect] {
        var message = message
        message.fromUser = user
        message.time = clock.now()
        let ref = outgoing.add(message)
        if screen.interactive { showStatus(of: ref) }
        if isStopped { notice("not connected: it waits in the outbox; /reconnect tries again", .warning) }
        return [.send(ref: ref, message)]
    }

    mutating func quit(status: Int32) -> [ChatEffect] {
        draining = false
        if screen.interactive { output += "\r\u{1B}[2K" }
        return [.quit(status: status)]
    }

    /// Shows message `ref`'s status: its line rewritten in place (in the scrollback too), or,
    /// unless `quietly`, a follow-up line.
    @discardableResult
    mutating func showStatus(of ref: Int, quietly: Bool = false) -> Bool {
        let tracked = outgoing[ref]
        var entry = HistoryEntry(tracked.message, id: tracked.messageId ?? 0)
        entry.status = tracked.status.historyName
        let line = Self.messageLine(entry, user: user, clock: clock, status: tracked.status)
        if let row = tracked.row, tracked.line != nil {
            outgoing[ref].line = line
            if let rewritten = screen.rewrite(row: row, with: line, input: inputLine) {
                output += rewritten
                return true
            }
            if quietly { return false }
        }
        if tracked.line == nil, screen.interactive || tracked.status == .sent || tracked.status.isFinal {
            // First time on screen (plain output: once transmitted, or failed before that).
            let (printed, row) = screen.print(line, input: inputLine)
            output += printed
            outgoing[ref].row = row
            outgoing[ref].line = line
        } else if tracked.status.isFinal {
            printLine(Self.followUpLine(tracked, clock: clock))
        }
        return true
    }

    /// Prints a notice line (`-- text`) above the input line.
    public mutating func inform(_ text: String) {
        notice(text, .warning)
    }

    mutating func notice(_ text: String, _ tone: Tone, prefix: String = "-- ") {
        printLine(StyledText(prefix + text, tone))
    }

    mutating func printLine(_ line: StyledText) {
        output += screen.print(line, input: inputLine).output
    }
}

extension DeliveryStatus {
    var isDelivered: Bool {
        if case .delivered = self { return true }
        return self == .read
    }

    var isRoomProgress: Bool {
        if case .roomDelivered = self { return true }
        return false
    }
}
