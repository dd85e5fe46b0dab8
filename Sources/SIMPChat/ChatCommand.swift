/// What one submitted line asks for.
public enum ChatCommand: Equatable, Sendable {
    /// Send `text` to `to`, or to the current peer when `to` is nil.
    case say(String, to: String?)
    /// `/to bob`: plain lines go to bob from now on.
    case switchPeer(String)
    /// `/image URL [scale]`: send an IMAGE message to the current peer.
    case image(url: String, scale: Float)
    /// `/file PATH`, `/image PATH`: send the file at PATH to the current peer (end to end
    /// encrypted, chunked; an image is checked to be a PNG, JPEG or GIF and shown with its size).
    case file(path: String, image: Bool)
    /// `/audio URL`: send an AUDIO message (a link to the recording) to the current peer.
    case audio(url: String)
    /// `/retry`: resend the messages that failed.
    case retry
    /// `/history [n]`: show n older messages from the history.
    case history(count: Int?)
    /// `/join ROOM`: join (or create) a room and talk to it.
    case join(room: String)
    /// `/leave [ROOM]`: leave the room (default: the current one).
    case leave(room: String?)
    /// `/members [ROOM]`: list the room's members (default: the current room).
    case members(room: String?)
    /// `/admit NAME [ROOM]`: let NAME, who joined the room by name, read its posts (default: the current room).
    case admit(user: String, room: String?)
    /// `/who [NAME... | #ROOM]`: presence (default: the current peer).
    case who([String])
    /// `/me ACTION`: send ACTION as an action (`* alice waves`) to the current peer.
    case action(String)
    /// `/clear`: clear the screen (the history file keeps everything; `/history` shows it).
    case clear
    /// `/reconnect`: connect again after the client stopped (the relay refused the login, or
    /// another session of this device took over).
    case reconnect
    /// `/status`: the connection, and the way messages go (UDP or the control connection).
    case status
    /// `/verify [NAME]`: the safety numbers with NAME's devices (default: the current peer).
    case verify(String?)
    /// `/verify [NAME] --confirm`: the numbers matched; NAME is marked verified.
    case confirmVerified(String?)
    /// `/verify [NAME] --accept`: NAME's changed key is accepted without comparing; NAME is
    /// no longer verified, and messages to NAME go again.
    case acceptKeyChange(String?)
    case help
    case quit
    /// A blank line.
    case nothing
    /// A line that cannot be carried out; the text says why and what to type instead.
    case invalid(String)

    /// The help text `/help` shows, one command per line, each at most 80 columns.
    public static let helpLines = [
        "@NAME TEXT       send TEXT to NAME (NAME becomes the current peer)",
        "TEXT             send TEXT to the current peer (shown in the prompt)",
        "/to NAME         talk to NAME from now on (also /query NAME)",
        "/msg NAME TEXT   send TEXT to NAME (same as @NAME TEXT)",
        "/me ACTION       send an action: * you ACTION",
        "/file PATH       send the file at PATH (spaces fine; or quote it)",
        "/image PATH      send a PNG, JPEG or GIF image file (shown with its size)",
        "/image URL [S]   send an image link, optionally with display scale S",
        "/audio URL       send an audio link",
        "/retry           resend the messages that failed (✗), in earlier sessions too",
        "/history [N]     show N older messages above (default 20; PageDown returns)",
        "/join ROOM       join (or create) ROOM and talk to it (@#ROOM TEXT posts too)",
        "/leave [ROOM]    leave ROOM (default: the current room; also /part)",
        "/members [ROOM]  list ROOM's members (default: the current room)",
        "/admit NAME [ROOM] let NAME, who joined ROOM by name, read its posts",
        "/who [NAME...]   who is online (default: the current peer; /who #ROOM too)",
        "/status          the connection, and whether messages go over UDP or TCP",
        "/reconnect       connect again after the relay refused the login (say, unlocked)",
        "/clear           clear the screen (/history shows earlier messages again)",
        "/verify [NAME]   safety numbers with NAME, to compare with NAME's /verify YOU",
        "  ... --confirm  they match: mark NAME verified (you are told if a key changes)",
        "  ... --accept   accept NAME's changed key unseen (NAME is then not verified)",
        "/help            this help",
        "/quit            leave (also Ctrl-D on an empty line, or Ctrl-C)",
        "Keys: Tab completes names, rooms, /commands, paths; PageUp/PageDown scroll back",
        "Marks: … pending  ✓ sent  ✓ (stored) receiver offline, delivered later",
        "       ✓ (no other members) a room post no one else is in the room to get",
        "       ✓ (to devices) one of the receiver's devices is online, delivered later",
        "       ✓✓ delivered  ✓✓ read  ✓✓ 2/2 room members who have it  ✗ failed",
    ]

    /// The commands, for Tab completion.
    public static let names = [
        "/to", "/msg", "/me", "/file", "/image", "/audio", "/retry", "/history", "/join", "/leave", "/members", "/admit", "/who", "/status",
        "/reconnect", "/clear", "/verify", "/help", "/quit",
    ]

    /// Parses a submitted line. `//text` sends `/text` literally.
    public static func parse(_ line: String) -> ChatCommand {
        let trimmed = line.trimmingWhitespace()
        if trimmed.isEmpty { return .nothing }
        if trimmed.hasPrefix("//") { return .say(String(trimmed.dropFirst()), to: nil) }
        if trimmed.hasPrefix("@") { return parseAddressed(trimmed) }
        guard trimmed.hasPrefix("/") else { return .say(trimmed, to: nil) }
        let words = trimmed.split(whereSeparator: \.isWhitespace).map(String.init)
        let arguments = Array(words.dropFirst())
        switch words[0].lowercased() {
        case "/to", "/query":
            guard arguments.count == 1 else { return .invalid("usage: \(words[0].lowercased()) NAME") }
            return .switchPeer(arguments[0])
        case "/msg":
            guard arguments.count >= 2 else { return .invalid("usage: /msg NAME TEXT (or @NAME TEXT)") }
            return parseAddressed("@" + trimmed.dropFirst(words[0].count).trimmingWhitespace())
        case "/me":
            let action = trimmed.dropFirst(words[0].count).trimmingWhitespace()
            guard !action.isEmpty else { return .invalid("usage: /me ACTION") }
            return .action(action)
        case "/clear":
            return .clear
        case "/reconnect":
            return .reconnect
        case "/file":
            return filePath(trimmed.dropFirst(words[0].count)).map { .file(path: $0, image: false) } ?? .invalid("usage: /file PATH")
        case "/image", "/img":
            // A link (with an optional scale) or a path (the rest of the line).
            let link = arguments.first?.contains("://") == true || (arguments.count == 2 && Float(arguments[1]) != nil)
            if !link, let path = filePath(trimmed.dropFirst(words[0].count)) {
                return .file(path: path, image: true)
            }
            return parseImage(arguments)
        case "/audio":
            guard arguments.count == 1 else { return .invalid("usage: /audio URL") }
            return .audio(url: arguments[0])
        case "/retry":
            return .retry
        case "/history":
            guard arguments.count <= 1 else { return .invalid("usage: /history [N]") }
            guard let text = arguments.first else { return .history(count: nil) }
            guard let count = Int(text), count > 0 else { return .invalid("/history takes a positive number, got \"\(text)\"") }
            return .history(count: count)
        case "/join":
            guard arguments.count == 1 else { return .invalid("usage: /join ROOM") }
            return .join(room: roomName(arguments[0]))
        case "/leave", "/part":
            guard arguments.count <= 1 else { return .invalid("usage: \(words[0].lowercased()) [ROOM]") }
            return .leave(room: arguments.first.map(roomName))
        case "/members":
            guard arguments.count <= 1 else { return .invalid("usage: /members [ROOM]") }
            return .members(room: arguments.first.map(roomName))
        case "/admit":
            guard (1...2).contains(arguments.count), !arguments[0].hasPrefix("#") else { return .invalid("usage: /admit NAME [ROOM]") }
            return .admit(user: arguments[0], room: arguments.count == 2 ? roomName(arguments[1]) : nil)
        case "/who":
            return .who(arguments)
        case "/status":
            return .status
        case "/verify":
            let names = arguments.filter { $0 != "--confirm" && $0 != "--accept" }
            guard names.count <= 1, names.count + 1 >= arguments.count else { return .invalid("usage: /verify [NAME] [--confirm | --accept]") }
            if arguments.contains("--accept") { return .acceptKeyChange(names.first) }
            return names.count < arguments.count ? .confirmVerified(names.first) : .verify(names.first)
        case "/help", "/?":
            return .help
        case "/quit", "/exit", "/q":
            return .quit
        default:
            return .invalid("unknown command \(words[0]); /help lists the commands (start with // to send a line beginning with /)")
        }
    }

    /// The path in the rest of a `/file` line: inside quotes (`"My File.pdf"`, `'…'`), or the
    /// whole rest of the line with a shell's backslash escapes undone (`My\ File.pdf`, as a
    /// terminal pastes a dropped file). Nil when empty.
    static func filePath(_ rest: Substring) -> String? {
        let text = rest.trimmingWhitespace()
        if let quote = text.first, quote == "\"" || quote == "'", text.count >= 2, text.last == quote {
            let inside = String(text.dropFirst().dropLast())
            return inside.isEmpty ? nil : inside
        }
        var path = ""
        var escaped = false
        for character in text {
            if escaped || character != "\\" {
                path.append(character)
                escaped = false
            } else {
                escaped = true
            }
        }
        return path.isEmpty ? nil : path
    }

    /// `#lobby` and `lobby` both name the room `lobby`.
    private static func roomName(_ word: String) -> String {
        word.hasPrefix("#") ? String(word.dropFirst()) : word
    }

    private static func parseAddressed(_ line: String) -> ChatCommand {
        let name = line.dropFirst().prefix { !$0.isWhitespace }
        guard !name.isEmpty else { return .invalid("usage: @NAME TEXT") }
        let text = line.dropFirst(name.count + 1).trimmingWhitespace()
        if text.isEmpty { return .switchPeer(String(name)) }
        return .say(text, to: String(name))
    }

    private static func parseImage(_ arguments: [String]) -> ChatCommand {
        guard (1...2).contains(arguments.count) else { return .invalid("usage: /image PATH (a PNG, JPEG or GIF file) or /image URL [SCALE]") }
        var scale: Float = 1
        if arguments.count == 2 {
            guard let parsed = Float(arguments[1]), parsed > 0, parsed.isFinite else {
                return .invalid("the image scale must be a positive number, got \"\(arguments[1])\"")
            }
            scale = parsed
        }
        return .image(url: arguments[0], scale: scale)
    }
}

extension StringProtocol {
    /// The text without leading and trailing whitespace.
    func trimmingWhitespace() -> String {
        guard let first = firstIndex(where: { !$0.isWhitespace }),
            let last = lastIndex(where: { !$0.isWhitespace })
        else { return "" }
        return String(self[first...last])
    }
}

/// A room request `simp chat` makes of the client.
public enum ChatRoomRequest: Equatable, Sendable, CustomStringConvertible {
    case join(String), leave(String), members(String)
    /// Admit `user` to the room (`/admit`).
    case admit(String, user: String)
    /// The room's members, asked without the user's asking: only changes are shown (joins, leaves).
    case watch(String)

    public var description: String {
        switch self {
        case .join(let room): return "/join #\(room)"
        case .leave(let room): return "/leave #\(room)"
        case .members(let room), .watch(let room): return "/members #\(room)"
        case .admit(let room, let user): return "/admit \(user) #\(room)"
        }
    }
}

/// Why a room request failed, for the user.
public struct ChatRoomError: Error, Equatable, Sendable {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
}
