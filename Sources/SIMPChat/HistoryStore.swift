import Foundation
import SIMPClient
import Synchronization

/// One message in a user's conversation history.
public struct HistoryEntry: Codable, Equatable, Sendable {
    public var id: UInt64
    /// Milliseconds since the Unix epoch (the sender's clock).
    public var time: Int64
    public var from: String
    public var to: String
    /// `text`, `image`, `audio`, or `file` (a file sent with `/file` or `/image`, or received:
    /// `file` says which).
    public var kind: String
    public var text: String
    public var imageURL: String?
    public var imageScale: Float?
    /// Outgoing messages: `pending`, `sent`, `stored`, `delivered`, `read`, `delivered N/M`
    /// (room posts), `failed`, or `retried` (failed, and `/retry` sent it again as a new message).
    public var status: String?
    /// Room posts (`from` is `#room`): the member who posted it.
    public var author: String?
    /// Received direct messages that did not come end to end encrypted: true (else absent).
    public var unencrypted: Bool?
    /// Received from a peer marked verified whose key changed since: true (else absent).
    public var keyChanged: Bool?
    /// A file sent or received (`kind` is `file`).
    public var file: HistoryFile?

    public init(
        id: UInt64, time: Int64, from: String, to: String, kind: String, text: String,
        imageURL: String? = nil, imageScale: Float? = nil, status: String? = nil
    ) {
        self.id = id
        self.time = time
        self.from = from
        self.to = to
        self.kind = kind
        self.text = text
        self.imageURL = imageURL
        self.imageScale = imageScale
        self.status = status
    }
}

/// A file in the history: one the user sent (`/file`, `/image`; its outcome is the entry's
/// `status`), or one sent to the user (recorded when it is announced; `path` once it is saved).
public struct HistoryFile: Codable, Equatable, Sendable {
    /// The file's name (a received file's: the name it was saved under, once saved).
    public var name: String
    public var size: UInt64
    /// An image's width and height (`/image`, or a received file that is a PNG, JPEG or GIF).
    public var width: Int?
    public var height: Int?
    /// Sent: the file as the user named it (what `/retry` sends again). Received: where it was
    /// saved; nil while it is not.
    public var path: String?
    /// Received: the SHA-256 (hex) its sender announced, which tells the saved file's entry.
    public var sha256: String?
    /// Received: the room it was sent to (no `#`), when this user and the sender are members
    /// of it (docs/E2E.md §17); shown as `#room alice: [file] …`. Nil: a direct file.
    public var room: String?
    /// Sent: the file's id once the relay held it for the receiver (✓ (stored)), so the news
    /// that the receiver got it turns its mark ✓✓, also in a later session.
    public var fileId: UInt64?

    public init(
        name: String, size: UInt64, width: Int? = nil, height: Int? = nil, path: String? = nil, sha256: String? = nil, room: String? = nil
    ) {
        self.room = room
        self.name = name
        self.size = size
        self.width = width
        self.height = height
        self.path = path
        self.sha256 = sha256
    }
}

/// A user's history on disk: `<directory>/<user>.jsonl`, one JSON object per line, appended
/// to. An outgoing message's later status is appended as `{"id":…,"status":…}` and folded
/// into the message when loading; a received file saved later, as `{"file":…,"from":…,"id":…}`
/// (a received entry's id is its sender's, so the sender names it too). The file is compacted to `keep` entries when it grows
/// past twice that. Appends may come from several threads (the chat, and the client's event
/// loop recording incoming messages); each line is written whole.
public final class HistoryStore: Sendable {
    /// The history file.
    public let url: URL
    /// Beside it, `<user>.peer`: who the user talked to last (`simp chat` starts there).
    public let lastPeerURL: URL
    /// Entries kept when compacting.
    public let keep: Int
    /// Held while a line is written; the lines that could not be written yet (a full disk), in
    /// order: written before the next line, so the history keeps every line, in order.
    private let writing = Mutex<[Data]>([])

    private struct StatusUpdate: Codable {
        var id: UInt64
        var status: String
    }

    private struct FileUpdate: Codable {
        var id: UInt64
        var from: String
        var file: HistoryFile
    }

    /// The store for `user` in `directory` (created, private to the user, if missing).
    public init(directory: URL, user: String, keep: Int = 2000) throws {
        let safeName = String(user.map { $0.isLetter || $0.isNumber || "-_.@".contains($0) ? $0 : "_" })
        let base = directory.appendingPathComponent((safeName.hasPrefix(".") ? "_" : "") + safeName)
        url = base.appendingPathExtension("jsonl")
        lastPeerURL = base.appendingPathExtension("peer")
        self.keep = keep
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        if !FileManager.default.fileExists(atPath: url.path) {
            _ = FileManager.default.createFile(atPath: url.path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
    }

    /// The default directory: `$SIMP_HOME/history`, else `~/.simp/history`.
    public static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        SIMPHome.directory(environment: environment).appendingPathComponent("history")
    }

    /// Every entry, oldest first, with status updates applied. Lines that do not parse are skipped.
    public func load() throws -> [HistoryEntry] {
        let data = try Data(contentsOf: url)
        var entries: [HistoryEntry] = []
        var positions: [UInt64: Int] = [:]
        let decoder = JSONDecoder()
        for line in data.split(separator: UInt8(ascii: "\n")) where !line.isEmpty {
            if let entry = try? decoder.decode(HistoryEntry.self, from: line) {
                positions[entry.id] = entries.count
                entries.append(entry)
            } else if let update = try? decoder.decode(StatusUpdate.self, from: line),
                let position = positions[update.id]
            {
                entries[position].status = update.status
            } else if let update = try? decoder.decode(FileUpdate.self, from: line),
                let position = entries.lastIndex(where: { $0.id == update.id && $0.from == update.from && $0.file != nil })
            {
                entries[position].file = update.file
            }
        }
        if entries.count > 2 * keep {
            entries.removeFirst(entries.count - keep)
            try rewrite(entries)
        }
        return entries
    }

    /// Who the user talked to last (a name or `#room`), nil if not known.
    public func loadLastPeer() -> String? {
        guard let data = try? Data(contentsOf: lastPeerURL) else { return nil }
        let name = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return name.isEmpty || name.contains(where: \.isWhitespace) ? nil : name
    }

    /// Remembers who the user talks to now (nil: no one), for the next start.
    public func saveLastPeer(_ peer: String?) throws {
        try Data(((peer ?? "") + "\n").utf8).write(to: lastPeerURL, options: .atomic)
    }

    /// Appends a message.
    public func append(_ entry: HistoryEntry) throws {
        try appendLine(JSONEncoder.compact.encode(entry))
    }

    /// Records a new status for the message `id`.
    public func update(id: UInt64, status: String) throws {
        try appendLine(JSONEncoder.compact.encode(StatusUpdate(id: id, status: status)))
    }

    /// Records what became of the file in the entry `id` from `from` (a received file, saved).
    public func update(id: UInt64, from: String, file: HistoryFile) throws {
        try appendLine(JSONEncoder.compact.encode(FileUpdate(id: id, from: from, file: file)))
    }

    /// How many lines wait in memory to be written (the disk was full): written with the
    /// next `append`, `update` or `writeWaiting`.
    public var waitingCount: Int { writing.withLock { $0.count } }

    /// Writes the lines waiting in memory, if any (they stay waiting on a failure).
    public func writeWaiting() throws {
        try writing.withLock { waiting in try write(&waiting) }
    }

    /// Writes `json` as one whole line after those waiting; on a failure it waits with them
    /// (in memory, written by a later call) and the error is thrown.
    private func appendLine(_ json: Data) throws {
        try writing.withLock { waiting in
            waiting.append(json)
            try write(&waiting)
        }
    }

    /// Writes the `waiting` lines, oldest first, each whole: a write that fails part way (disk
    /// full) is cut back off, and a torn last line left by a crash is ended first, so a later
    /// line never continues a torn one (and is lost with it when loading).
    private func write(_ waiting: inout [Data]) throws {
        guard !waiting.isEmpty else { return }
        let handle = try FileHandle(forUpdating: url) // reads the last byte too
        defer { try? handle.close() }
        let end = try handle.seekToEnd()
        var lines = waiting.reduce(into: Data()) { $0 += $1 + Data("\n".utf8) }
        if end > 0 {
            try handle.seek(toOffset: end - 1)
            if try handle.read(upToCount: 1) != Data("\n".utf8) { lines.insert(UInt8(ascii: "\n"), at: 0) }
            try handle.seek(toOffset: end)
        }
        do { try handle.write(contentsOf: lines) } catch {
            try? handle.truncate(atOffset: end)
            throw error
        }
        waiting.removeAll()
    }

    private func rewrite(_ entries: [HistoryEntry]) throws {
        var data = Data()
        for entry in entries { data += try JSONEncoder.compact.encode(entry) + Data("\n".utf8) }
        try data.write(to: url, options: .atomic)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
    }
}

extension JSONEncoder {
    /// Sorted keys, no escaped slashes: one readable line per object.
    static var compact: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}
