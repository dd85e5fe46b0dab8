import DequeModule
import Foundation
import SIMPCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What tells one received message from every other: its sender (`fromUser`), the member who
/// posted it in a room (`author`, empty otherwise) and its `messageId`. A retransmission, a copy
/// from the relay's log and a resend from the sender's outbox all carry the same key.
public struct DeliveredKey: Hashable, Sendable, Codable {
    public var sender: String
    public var author: String
    public var messageId: UInt64

    public init(sender: String, author: String = "", messageId: UInt64) {
        self.sender = sender
        self.author = author
        self.messageId = messageId
    }

    /// The key of `message`.
    public init(_ message: SIMPMessage) {
        self.init(sender: message.fromUser, author: message.author, messageId: message.messageId)
    }

    private enum CodingKeys: String, CodingKey {
        case sender = "f", author = "a", messageId = "i"
    }
}

/// The messages a receiving application of one (user, device) already has, kept on disk so
/// that a restarted receiver skips (but receipts) copies of them: `simp listen` adds each
/// message right after its line is written, before the receipt leaves, and a message the relay
/// delivers again after a `kill -9` (its receipt was cut off) is not printed twice
/// (docs/PROTOCOL.md §6.4).
///
/// The file, `<home>/received/<user>/<device>.jsonl`, has one JSON object per message
/// (`{"a":AUTHOR,"f":SENDER,"i":ID}`), appended with one `write`. The newest `keepPerSender`
/// keys of each sender are kept (the receiver's dedupe window: copies of older messages do
/// not come again); the file is rewritten with just those when it has grown to twice them.
/// The device's `DeviceLock` makes one process its only user.
public final class DeliveredRecord: Sendable {
    /// The record's file.
    public let url: URL
    /// Keys kept per sender.
    public let keepPerSender: Int

    private struct State {
        var descriptor: Int32
        var keys: Set<DeliveredKey> = []
        /// Each sender's keys, oldest first.
        var bySender: [String: Deque<DeliveredKey>] = [:]
        /// Lines in the file.
        var lines = 0
    }

    private let state: Mutex<State>

    /// The record of `user` on `device` under `home`, loaded (created, private to the user, if missing).
    public convenience init(home: URL, user: String, device: String, keepPerSender: Int = 4096) throws {
        let directory = home.appendingPathComponent("received").appendingPathComponent(SIMPHome.safeComponent(user))
        try self.init(url: directory.appendingPathComponent(device + ".jsonl"), keepPerSender: keepPerSender)
    }

    /// The record in `url`, loaded (created if missing). Lines that do not parse (a write cut
    /// off by a crash) are skipped.
    public init(url: URL, keepPerSender: Int = 4096) throws {
        self.url = url
        self.keepPerSender = max(1, keepPerSender)
        do { try SIMPHome.makeDirectory(url.deletingLastPathComponent()) } catch {
            throw DeviceError("cannot create \(url.deletingLastPathComponent().path): \(error.localizedDescription)")
        }
        var loaded = State(descriptor: -1)
        let data = FileManager.default.contents(atPath: url.path) ?? Data()
        let decoder = JSONDecoder()
        for line in data.split(separator: UInt8(ascii: "\n")) {
            loaded.lines += 1
            if let key = try? decoder.decode(DeliveredKey.self, from: line) { Self.remember(key, in: &loaded, keep: self.keepPerSender) }
        }
        let descriptor = open(url.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw DeviceError("cannot open \(url.path): \(String(cString: strerror(errno)))") }
        loaded.descriptor = descriptor
        if let last = data.last, last != UInt8(ascii: "\n") { _ = write(descriptor, "\n", 1) } // after a cut-off line
        state = Mutex(loaded)
        try state.withLock { try compactIfLarge(&$0) }
    }

    deinit {
        state.withLock { _ = close($0.descriptor) }
    }

    /// Whether the message with `key` was added.
    public func contains(_ key: DeliveredKey) -> Bool {
        state.withLock { $0.keys.contains(key) }
    }

    /// Adds `key` (one line appended to the file; nothing if it is there already).
    public func add(_ key: DeliveredKey) throws {
        try state.withLock { state in
            guard !state.keys.contains(key) else { return }
            let line = try JSONEncoder.recordLine.encode(key) + Data("\n".utf8)
            let written = line.withUnsafeBytes { write(state.descriptor, $0.baseAddress, $0.count) }
            guard written == line.count else { throw DeviceError("cannot write \(url.path): \(String(cString: strerror(errno)))") }
            Self.remember(key, in: &state, keep: keepPerSender)
            state.lines += 1
            try compactIfLarge(&state)
        }
    }

    /// How many keys are kept.
    public var count: Int { state.withLock { $0.keys.count } }

    private static func remember(_ key: DeliveredKey, in state: inout State, keep: Int) {
        guard state.keys.insert(key).inserted else { return }
        state.bySender[key.sender, default: []].append(key)
        if state.bySender[key.sender]!.count > keep, let oldest = state.bySender[key.sender]!.popFirst() {
            state.keys.remove(oldest)
        }
    }

    /// Rewrites the file with the kept keys once it has twice as many lines (and at least
    /// `2 × keepPerSender`): written beside and renamed into place, so a crash leaves the old
    /// file or the new.
    private func compactIfLarge(_ state: inout State) throws {
        guard state.lines >= 2 * max(state.keys.count, keepPerSender) else { return }
        var data = Data()
        for keys in state.bySender.values {
            for key in keys { data += try JSONEncoder.recordLine.encode(key) + Data("\n".utf8) }
        }
        let partial = url.path + ".partial"
        guard FileManager.default.createFile(atPath: partial, contents: data, attributes: [.posixPermissions: 0o600]),
            rename(partial, url.path) == 0
        else {
            unlink(partial)
            throw DeviceError("cannot rewrite \(url.path): \(String(cString: strerror(errno)))")
        }
        let descriptor = open(url.path, O_WRONLY | O_APPEND | O_CLOEXEC)
        guard descriptor >= 0 else { throw DeviceError("cannot open \(url.path): \(String(cString: strerror(errno)))") }
        close(state.descriptor)
        state.descriptor = descriptor
        state.lines = state.keys.count
    }
}

extension JSONEncoder {
    /// Sorted keys: one short line per object.
    static var recordLine: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }
}
