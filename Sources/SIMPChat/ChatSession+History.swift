import Foundation
import SIMPCore

/// The history on screen (the entries shown at start and by `/history`, dimmed, with the
/// status they had when the session that wrote them ended), and the files in it: a file the
/// user sent is an entry of its own (`kind` `file`, its outcome as its status, `sending` if the
/// chat stopped before the end), a file received is its announcement's entry, told where the
/// file was saved once it is (`HistoryStore.update(id:from:file:)`).
extension ChatSession {
    /// Shows the last `count` history entries not shown yet (at start).
    mutating func showHistory(count: Int, except hidden: Set<UInt64> = []) {
        let from = max(0, historyShownFrom - count)
        for entry in history[from..<historyShownFrom] where !hidden.contains(entry.id) { printLine(historyLine(entry)) }
        historyShownFrom = from
    }

    /// `/history [N]`: the `count` entries before those shown, put above what is on screen.
    mutating func showOlderHistory(count: Int) {
        guard historyShownFrom > 0 else { return notice("no older messages", .dim) }
        let from = max(0, historyShownFrom - count)
        let lines = history[from..<historyShownFrom].map(historyLine)
        historyShownFrom = from
        output += screen.insertAbove(lines, input: inputLine)
    }

    /// A history entry as shown from the history file: dimmed.
    func historyLine(_ entry: HistoryEntry) -> StyledText {
        StyledText(Self.messageLine(entry, user: user, clock: clock).plain, .dim)
    }

    /// Records file `ref`, just started, in the history: `sending` until its outcome, which
    /// `update` records as a message's.
    mutating func recordFileSent(ref: Int) -> [ChatEffect] {
        guard let file = outgoing[ref].file else { return [] }
        let message = outgoing[ref].message
        let id = Self.fileEntryId(time: message.time, ref: ref)
        var entry = HistoryEntry(
            id: id, time: message.time, from: user, to: message.toUser, kind: "file", text: file.label,
            status: DeliveryStatus.sendingFileName)
        entry.file = HistoryFile(file)
        outgoing[ref].historyId = id
        history.append(entry)
        return [.record(entry)]
    }

    /// The history id of a file sent (it has no message id of its own): the top bit set, which
    /// the client's message ids (microseconds since the epoch, counted up) never reach, then the
    /// time in milliseconds and the session's ref.
    public static func fileEntryId(time: Int64, ref: Int) -> UInt64 {
        1 << 63 | UInt64(max(0, time)) << 12 | UInt64(ref & 0xFFF)
    }

    /// `file` from `from` was saved: the entries of its announcements not saved yet (its sender
    /// may have announced it again after a restart) say where, matched by its SHA-256.
    mutating func recordFileSaved(from: String, _ file: ChatFile) -> [ChatEffect] {
        guard let sha256 = file.sha256 else { return [] }
        let saved = HistoryFile(file)
        var effects: [ChatEffect] = []
        for index in history.indices
        where history[index].from == from && history[index].file?.sha256 == sha256 && history[index].file?.path == nil {
            history[index].file = saved
            effects.append(.recordFile(messageId: history[index].id, from: from, saved))
        }
        return effects
    }
}

extension HistoryEntry {
    /// The entry for a message this user received; a direct message or room post that did not
    /// come end to end encrypted (`--no-e2e`, or a peer or member without keys) is marked so.
    /// A file's announcement is a `file` entry: its name, size and SHA-256 (never its key).
    public init(received message: SIMPMessage) {
        self.init(message)
        if !message.isEndToEnd {
            unencrypted = true
        } else if message.fileId != 0 {
            let file = HistoryFile(
                name: message.content, size: message.fileSize, sha256: message.fileDigest.map { String(format: "%02x", $0) }.joined())
            (kind, text, self.file) = ("file", file.label, file)
        }
    }

    /// A file this user sent that failed, or that an earlier session stopped before the end:
    /// what `/retry` does (the file looked at again and sent, going on where it stopped); nil
    /// for any other entry.
    var fileToRetry: ChatEffect? {
        guard kind == "file", let file, let path = file.path, status == "failed" || status == DeliveryStatus.sendingFileName
        else { return nil }
        return .checkFile(path: path, to: to, image: file.width != nil)
    }
}
