import SIMPClient
import SIMPCore

/// Something the session needs done outside it.
public enum ChatEffect: Equatable, Sendable {
    /// Submit `message` to the client and report back with `submitted` and `resolved`.
    case send(ref: Int, SIMPMessage)
    /// Append to the history file.
    case record(HistoryEntry)
    case recordStatus(messageId: UInt64, status: String)
    /// Carry out a room request with the client and report back with `roomAnswered`.
    case room(ChatRoomRequest)
    /// Tell `sender` its messages up to `upTo` were seen (a read marker).
    case markRead(from: String, upTo: UInt64)
    /// Tell `to` this user is typing.
    case typing(to: String)
    /// Ask the presence of `users` (and follow their changes); `show` prints the answer (`/who`).
    case who(users: [String], room: String?, show: Bool)
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
    public private(set) var peer: String?
    public private(set) var editor = LineEditor()
    public private(set) var screen: Screen
    public private(set) var outgoing = OutgoingTracker()
    public private(set) var connection: ConnectionState = .connecting
    private var history: [HistoryEntry]
    /// Index of the oldest history entry shown so far.
    private var historyShownFrom: Int
    private var draining = false
    private var hasConnected = false
    private var output = ""
    private let clock: ChatClock

    /// Whether read markers are sent when the user has seen a conversation (`--no-read-receipts` turns them off).
    public var sendsReadMarkers = true
    /// Newest unseen message id per peer (read markers are sent when the user switches to it).
    private var unread: [String: UInt64] = [:]
    /// When each peer was last reported typing (ms, chat clock).
    private var typingSince: [String: Int64] = [:]
    private var lastTypingSent: Int64 = .min
    /// How long a typing indicator is shown, and how often one is sent, in ms.
    public static let typingWindow: Int64 = 4000

    public init(user: String, peer: String?, screen: Screen, history: [HistoryEntry] = [], clock: ChatClock) {
        self.user = user
        self.peer = peer
        self.screen = screen
        self.history = history
        self.historyShownFrom = history.count
        self.clock = clock
    }

    /// Output produced since the last call.
    public mutating func takeOutput() -> String {
        defer { output = "" }
        return output
    }

    /// The first screen: recent history (interactive only) and the input line.
    public mutating func start(showingHistory count: Int = 10) {
        if screen.interactive {
            if !history.isEmpty {
                let shown = min(count, history.count)
                notice("last \(shown) of \(history.count) messages; /history shows older ones", .dim)
                showHistory(count: shown)
            }
            notice("you are \(user); \(peer.map { "talking to \($0)" } ?? "@NAME TEXT to talk to someone"); /help for commands", .dim)
        }
        output += screen.draw(inputLine)
    }

    // MARK: Input

    /// Applies keys typed in the terminal.
    public mutating func handle(_ keys: [Key]) -> [ChatEffect] {
        var effects: [ChatEffect] = []
        for key in keys {
            switch editor.handle(key) {
            case .edited:
                output += screen.draw(inputLine)
            case .submitted(let line): effects += submitLine(line)
            case .interrupted, .endOfInput: effects += quit(status: 0)
            case .redraw:
                screen.resize(width: screen.width, height: screen.height)
                output += "\u{1B}[2J\u{1B}[H" + screen.draw(inputLine)
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
            guard let peer else {
                notice("no one to send to: type @NAME TEXT, or /to NAME first", .failure)
                return []
            }
            return send(SIMPMessage(kind: .text, toUser: peer, content: text)) + effects
        case .image(let url, let scale):
            guard let peer else {
                notice("no one to send to: type /to NAME first", .failure)
                return []
            }
            var message = SIMPMessage(kind: .image, toUser: peer)
            message.imageURL = url
            message.imageScale = scale
            return send(message)
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
            let failures = outgoing.takeFailures()
            if failures.isEmpty { notice("nothing to retry: no message failed", .dim) }
            return failures.flatMap { send($0) }
        case .history(let count):
            if historyShownFrom == 0 { notice("no older messages", .dim) }
            showHistory(count: count ?? 20)
            return []
        case .join(let room):
            return [.room(.join(room))]
        case .leave(let room):
            guard let room = room ?? currentRoom else { return askWhichRoom("/leave") }
            return [.room(.leave(room))]
        case .members(let room):
            guard let room = room ?? currentRoom else { return askWhichRoom("/members") }
            return [.room(.members(room))]
        case .help:
            for line in ChatCommand.helpLines { notice(line, .dim, prefix: "") }
            return []
        case .quit:
            return quit(status: 0)
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
        screen.resize(width: width, height: height)
        output += screen.draw(inputLine)
    }

    // MARK: Client events

    /// A message delivered to this user. A direct message from the current peer is seen at
    /// once (a read marker goes back); from anyone else when the user switches to them.
    public mutating func receive(_ message: SIMPMessage) -> [ChatEffect] {
        let entry = HistoryEntry(message)
        history.append(entry)
        typingSince[message.fromUser] = nil
        printLine(Self.messageLine(entry, user: user, clock: clock))
        var effects: [ChatEffect] = [.record(entry)]
        if sendsReadMarkers, message.author.isEmpty, !RelayCore.isRoomAddress(message.fromUser) {
            if message.fromUser == peer {
                effects.append(.markRead(from: message.fromUser, upTo: message.messageId))
            } else {
                unread[message.fromUser] = max(unread[message.fromUser] ?? 0, message.messageId)
            }
        }
        return effects
    }

    /// News about a peer: typing (shown in the prompt for a few seconds) or presence.
    public mutating func peerEvent(_ event: PeerEvent) {
        switch event {
        case .typing(let from):
            typingSince[from] = clock.now()
            output += screen.draw(inputLine)
        case .presence(let who, let online, _):
            notice("\(who) is \(online ? "online" : "offline")", .dim)
        }
    }

    /// The client answered a WHO.
    public mutating func whoAnswered(_ entries: Result<[PresenceEntry], ChatRoomError>, show: Bool) {
        guard show else { return }
        switch entries {
        case .failure(let error): notice("/who: \(error.reason)", .failure)
        case .success(let entries):
            for entry in entries {
                let seen = entry.lastSeen > 0 ? ", last seen \(clock.format(entry.lastSeen))" : ", never seen"
                notice("\(entry.user): " + (entry.online ? "online" : "offline" + seen), .dim)
            }
        }
    }

    /// (Re)connected: follow the current peer's presence again (the relay forgets followers
    /// when they disconnect).
    public mutating func followCurrentPeer() -> [ChatEffect] { peerChosen() }

    /// The current peer changed: what it sent is now seen, and its presence is followed.
    private mutating func peerChosen() -> [ChatEffect] {
        guard let peer, !RelayCore.isRoomAddress(peer) else { return [] }
        var effects: [ChatEffect] = [.who(users: [peer], room: nil, show: false)]
        if sendsReadMarkers, let id = unread.removeValue(forKey: peer) { effects.append(.markRead(from: peer, upTo: id)) }
        return effects
    }

    /// A typing indicator for the current peer, at most one per `typingWindow`.
    private mutating func typingEffect() -> [ChatEffect] {
        guard let peer, !RelayCore.isRoomAddress(peer), !editor.text.isEmpty, !editor.text.hasPrefix("/") else { return [] }
        let now = clock.now()
        guard lastTypingSent == .min || now - lastTypingSent >= Self.typingWindow else { return [] }
        lastTypingSent = now
        return [.typing(to: peer)]
    }

    /// The client took message `ref` as `messageId`: transmitted if connected, else it waits
    /// for the reconnect (and stays pending until then).
    public mutating func submitted(ref: Int, messageId: UInt64) -> [ChatEffect] {
        guard outgoing.markSubmitted(ref: ref, messageId: messageId, transmitted: isConnected) else { return [] }
        var entry = HistoryEntry(outgoing[ref].message, id: messageId)
        entry.status = outgoing[ref].status.historyName
        history.append(entry)
        showStatus(of: ref)
        return [.record(entry)]
    }

    /// News about a message the relay stored for an offline receiver: delivered later (✓✓) or
    /// discarded (✗ with the reason).
    public mutating func noticed(_ news: DeliveryNotice) -> [ChatEffect] {
        switch news {
        case .stored:
            return [] // the send outcome says it
        case .roomProgress(_, let room, let delivered, let total):
            if delivered == total { notice("#\(room): delivered \(delivered)/\(total)", .dim) }
            return []
        case .read(let upTo, let reader):
            var effects: [ChatEffect] = []
            for ref in outgoing.messages.indices {
                let tracked = outgoing[ref]
                guard tracked.message.toUser == reader, let id = tracked.messageId, id <= upTo,
                      tracked.status.isDelivered || tracked.status == .stored else { continue }
                effects += resolved(ref: ref, .read)
            }
            return effects
        case .delivered(let id, _):
            guard let ref = outgoing.messages.last(where: { $0.messageId == id })?.ref else { return [] }
            let waited = Double(max(0, clock.now() - outgoing[ref].message.time))
            return resolved(ref: ref, .delivered(latencyMillis: waited))
        case .discarded(let id, _, _, let reason):
            guard let ref = outgoing.messages.last(where: { $0.messageId == id })?.ref else { return [] }
            return resolved(ref: ref, .failed(reason))
        }
    }

    private mutating func askWhichRoom(_ command: String) -> [ChatEffect] {
        notice("which room? type \(command) ROOM, or /join ROOM first", .failure)
        return []
    }

    /// The room the current peer names, if it is one.
    private var currentRoom: String? {
        guard let peer, peer.hasPrefix("#") else { return nil }
        return String(peer.dropFirst())
    }

    /// The client answered a room request: the members, or why it failed.
    public mutating func roomAnswered(_ request: ChatRoomRequest, _ answer: Result<[String], ChatRoomError>) {
        switch (request, answer) {
        case (_, .failure(let error)):
            notice("\(request): \(error.reason)", .failure)
        case (.join(let room), .success(let members)):
            peer = "#" + room
            notice("joined #\(room) (\(members.joined(separator: ", "))); plain lines go to the room", .dim)
        case (.leave(let room), .success):
            if peer == "#" + room { peer = nil }
            notice("left #\(room)", .dim)
        case (.members(let room), .success(let members)):
            notice("#\(room): \(members.joined(separator: ", "))", .dim)
        }
    }

    /// The outcome of message `ref` is known.
    public mutating func resolved(ref: Int, _ status: DeliveryStatus) -> [ChatEffect] {
        // A late "stored" never undoes news that the stored message was delivered meanwhile.
        if status == .stored, outgoing[ref].status.isDelivered { return [] }
        outgoing.resolve(ref: ref, status)
        showStatus(of: ref)
        var effects: [ChatEffect] = []
        if let id = outgoing[ref].messageId {
            if let index = history.lastIndex(where: { $0.id == id }) { history[index].status = status.historyName }
            effects.append(.recordStatus(messageId: id, status: status.historyName))
        }
        if draining, outgoing.unresolvedCount == 0 { effects += quit(status: exitStatus) }
        return effects
    }

    /// The client's connection state changed.
    public mutating func connectionChanged(_ state: ConnectionState) {
        connection = state
        switch state {
        case .connecting:
            output += screen.draw(inputLine)
        case .connected(let relayId):
            notice(hasConnected ? "reconnected (relay \(relayId))" : "connected as \(user) (relay \(relayId))", .success)
            hasConnected = true
            for ref in outgoing.markResumed() { showStatus(of: ref) }
        case .reconnecting(let attempt, let delay):
            let what = attempt == 1 ? "connection lost" : "relay still unreachable"
            notice("\(what); reconnecting in \(Self.seconds(delay)) (attempt \(attempt))", .warning)
        case .offline(let reason):
            notice("offline: \(reason)", .failure)
        }
    }

    // MARK: Output

    private var isConnected: Bool {
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
        prompt = prompt + StyledText(peer ?? "", .peer)
        if let peer, let since = typingSince[peer], clock.now() - since < Self.typingWindow {
            prompt = prompt + StyledText(" (typing…)", .dim)
        }
        prompt = prompt + StyledText("> ", .bold)
        return InputLine(prompt: prompt, text: editor.text, cursor: editor.cursor)
    }

    /// 1 if a message was neither delivered nor stored for an offline receiver (and not
    /// resent), 0 otherwise.
    private var exitStatus: Int32 {
        outgoing.messages.contains { !$0.status.isDelivered && $0.status != .stored && !$0.retried } ? 1 : 0
    }

    private mutating func send(_ message: SIMPMessage) -> [ChatEffect] {
        var message = message
        message.fromUser = user
        message.time = clock.now()
        let ref = outgoing.add(message)
        if screen.interactive { showStatus(of: ref) }
        return [.send(ref: ref, message)]
    }

    private mutating func quit(status: Int32) -> [ChatEffect] {
        draining = false
        if screen.interactive { output += "\r\u{1B}[2K" }
        return [.quit(status: status)]
    }

    /// Shows message `ref`'s status: its line rewritten in place, or a follow-up line.
    private mutating func showStatus(of ref: Int) {
        let tracked = outgoing[ref]
        var entry = HistoryEntry(tracked.message, id: tracked.messageId ?? 0)
        entry.status = tracked.status.historyName
        let line = Self.messageLine(entry, user: user, clock: clock, status: tracked.status)
        if let row = tracked.row, let old = tracked.line,
           let rewritten = screen.rewrite(row: row, old: old, with: line, input: inputLine) {
            output += rewritten
            outgoing[ref].line = line
            return
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
    }

    private mutating func showHistory(count: Int) {
        let from = max(0, historyShownFrom - count)
        for entry in history[from..<historyShownFrom] {
            printLine(StyledText(Self.messageLine(entry, user: user, clock: clock).plain, .dim))
        }
        historyShownFrom = from
    }

    /// Prints a notice line (`-- text`) above the input line.
    public mutating func inform(_ text: String) {
        notice(text, .warning)
    }

    private mutating func notice(_ text: String, _ tone: Tone, prefix: String = "-- ") {
        printLine(StyledText(prefix + text, tone))
    }

    private mutating func printLine(_ line: StyledText) {
        output += screen.print(line, input: inputLine).output
    }
}

extension DeliveryStatus {
    var isDelivered: Bool {
        if case .delivered = self { return true }
        return self == .read
    }
}
