import SIMPClient
import SIMPCore

/// A file the user asked to send, as the controller found it on disk.
public struct ChatFile: Equatable, Sendable {
    public var path: String
    public var name: String
    public var size: UInt64
    /// Its width and height when sent with `/image` (nil: `/file`).
    public var image: ImageDimensions?
    /// A file received: its SHA-256 (hex), as announced and checked.
    public var sha256: String?
    /// A file received in a room both are members of: the room (no `#`).
    public var room: String?

    public init(path: String, name: String, size: UInt64, image: ImageDimensions? = nil, sha256: String? = nil, room: String? = nil) {
        self.room = room
        self.path = path
        self.name = name
        self.size = size
        self.image = image
        self.sha256 = sha256
    }

    /// `[file] report.pdf (1.2 MB)`, `[image] cat.png 640×480 (52.1 kB)`.
    public var label: String { HistoryFile(self).label }
}

extension HistoryFile {
    /// The history's record of `file`.
    init(_ file: ChatFile) {
        self.init(
            name: file.name, size: file.size, width: file.image?.width, height: file.image?.height, path: file.path,
            sha256: file.sha256, room: file.room)
    }

    /// `[file] report.pdf (1.2 MB)`, `[image] cat.png 640×480 (52.1 kB)`.
    var label: String {
        let dimensions = width.flatMap { width in height.map { "\(width)×\($0)" } }
        return (dimensions.map { "[image] \(name) \($0) " } ?? "[file] \(name) ") + "(\(ByteCount.text(size)))"
    }
}

/// `/file PATH` and `/image PATH` (docs/USAGE.md): the controller checks the file
/// (`ChatEffect.checkFile`), the session shows a line for it whose mark is the transfer's
/// progress in place, then ✓✓ once the receiver has the whole file, or ✗ and why; files
/// received are announced, then shown once saved. In a room the mark counts the members who
/// have the whole file (✓✓ 2/2), as for a post. Both are in the history (`ChatSession+History`).
extension ChatSession {
    /// `/file PATH` or `/image PATH` was typed: the controller looks at the file first.
    mutating func fileAsked(path: String, image: Bool) -> [ChatEffect] {
        guard let peer else {
            notice("no one to send to: type /to NAME first, then /\(image ? "image" : "file") PATH", .failure)
            return []
        }
        return [.checkFile(path: path, to: peer, image: image)]
    }

    /// The controller's look at a file to send: a line for it and the transfer, or why not.
    public mutating func fileChecked(to peer: String, _ result: Result<ChatFile, ChatRoomError>) -> [ChatEffect] {
        switch result {
        case .failure(let error):
            notice(error.reason, .failure)
            return []
        case .success(let file):
            var message = SIMPMessage(kind: .text, toUser: peer, content: file.label)
            message.fromUser = user
            message.time = clock.now()
            unreadCounts[peer] = nil
            let ref = outgoing.add(message)
            outgoing[ref].file = file
            if screen.interactive { showStatus(of: ref) }
            return recordFileSent(ref: ref) + [.sendFile(ref: ref, file, to: peer)]
        }
    }

    /// How far file `ref` is: its mark, rewritten in place (`3.1 MB of 10.0 MB, 4.2 MB/s, ETA 1.6 s`).
    public mutating func fileProgress(ref: Int, _ progress: String) {
        guard !outgoing[ref].status.isFinal else { return }
        outgoing.resolve(ref: ref, .transferring(progress))
        showStatus(of: ref, quietly: true)
    }

    /// A file's announcement arrived from `message.fromUser`: its chunks follow. As a direct
    /// message does, it makes its sender the one replies go to when the chat has no one to talk
    /// to, and from someone other than the current peer it is counted in the prompt and rings.
    /// Sent to a room (`fileRoom`, already checked: both are members) it is a room line, as a
    /// post is: `#team alice is sending …`, counted for `#team`, no bell, nobody adopted; the
    /// history entry, recorded before the check without the room, is told the room.
    mutating func fileAnnounced(_ message: SIMPMessage) -> [ChatEffect] {
        var entry = HistoryEntry(received: message)
        let room = message.fileRoom.isEmpty ? nil : message.fileRoom
        entry.file?.room = room
        history.append(entry)
        learnNames(message.fromUser)
        typingSince[message.fromUser] = nil
        showNewMarker()
        let size = ByteCount.text(message.fileSize)
        if let room, let file = entry.file {
            countUnread(from: "#" + room, ringing: false)
            notice("#\(room) \(message.fromUser) is sending \(message.content) (\(size))", .dim)
            return [.recordFile(messageId: entry.id, from: entry.from, file)]
        }
        let adopted = peer == nil
        if adopted { peer = message.fromUser }
        countUnread(from: message.fromUser, ringing: true)
        notice("\(message.fromUser) is sending \(message.content) (\(size))", .dim)
        return adopted ? repliesGo(to: message.fromUser) : []
    }

    /// A file from `from` was received whole, its SHA-256 checked, and saved at `path`
    /// (`receivedBefore`: sent again, the copy saved earlier is still there):
    /// `alice: [file] NAME (SIZE) saved to PATH`; its announcement's history entry says where.
    public mutating func fileSaved(from: String, _ file: ChatFile, receivedBefore: Bool = false) -> [ChatEffect] {
        var entry = HistoryEntry(
            id: 0, time: clock.now(), from: from, to: user, kind: "text", text: file.label + " sent again: already saved at " + file.path)
        if !receivedBefore { (entry.kind, entry.file) = ("file", HistoryFile(file)) } // `… saved to PATH`
        printLine(Self.messageLine(entry, user: user, clock: clock))
        return recordFileSaved(from: from, file)
    }

    /// The relay holds sent file `ref` whole as `fileId` for its receiver's devices (✓ (stored)):
    /// its history entry keeps the id, so that the relay's news that the receiver got the file
    /// turns the mark ✓✓, in this session or a later one (docs/PROTOCOL.md §5.7).
    public mutating func fileStored(ref: Int, fileId: UInt64) -> [ChatEffect] {
        var effects: [ChatEffect] = []
        if let id = outgoing[ref].historyId, let index = history.lastIndex(where: { $0.id == id }), var file = history[index].file {
            file.fileId = fileId
            history[index].file = file
            effects.append(.recordFile(messageId: id, from: user, file))
        }
        guard filesReceivedEarly.remove(fileId) == nil else {
            return effects + resolved(ref: ref, .delivered(latencyMillis: Double(max(0, clock.now() - outgoing[ref].message.time))))
        }
        return effects + resolved(ref: ref, .stored)
    }

    /// `receiver` has file `fileId` this user sent through the relay, whole and verified: its
    /// mark turns ✓✓ in place, or, for a file sent in an earlier session, its line is shown
    /// again with ✓✓; the history keeps it.
    mutating func fileReceived(fileId: UInt64, by receiver: String) -> [ChatEffect] {
        if let effects = roomFileReceived(fileId: fileId, by: receiver) { return effects }
        guard let index = history.lastIndex(where: { $0.from == user && $0.to == receiver && $0.file?.fileId == fileId }) else {
            if filesReceivedEarly.count >= 256 { filesReceivedEarly = [] } // never claimed: not a file of this chat's
            filesReceivedEarly.insert(fileId)
            keepRoomFileNews(fileId: fileId, by: receiver)
            return []
        }
        let delivered = DeliveryStatus.delivered(latencyMillis: 0).historyName
        if let ref = outgoing.messages.last(where: { $0.historyId == history[index].id })?.ref {
            guard !outgoing[ref].status.isDelivered else { return [] }
            return resolved(ref: ref, .delivered(latencyMillis: Double(max(0, clock.now() - outgoing[ref].message.time))))
        }
        guard history[index].status != delivered else { return [] }
        history[index].status = delivered
        printLine(Self.messageLine(history[index], user: user, clock: clock))
        return [.recordStatus(messageId: history[index].id, status: delivered)]
    }

    /// A file sent to this user could not be received (refused as too large, the disk full,
    /// its digest wrong): the reason, as a notice.
    public mutating func fileNotReceived(_ reason: String) {
        notice("file not received: \(reason)", .failure)
    }
}
