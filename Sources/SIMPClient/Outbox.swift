import Foundation
import NIOConcurrencyHelpers
import NIOCore
import SIMPCore
import SIMPE2E

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Messages of one (user, device) that were sent but whose outcome is not known yet, kept on
/// disk so they outlive the process: `<home>/outbox/<user>/<device>.outbox/`.
///
/// The outbox is a log, `outbox.log` (docs/E2E.md §15): records `u32 length ‖ u64
/// FNV-1a-64(body) ‖ body`, body `0x01 ‖ the message's protobuf encoding` (the datagram payload
/// of docs/PROTOCOL.md §2, with its original `messageId`) for a message kept, or `0x02 ‖ u64
/// messageId` for one whose outcome is known. `save` appends a message without waiting for the
/// disk; `sync` makes everything saved since the last one durable with **one** `fdatasync` (the
/// client calls it once per burst of messages submitted, before any of them is transmitted or
/// shown as sent). A record cut off by a crash ends the log (it is cut away when the log is next
/// opened for writing). The log is rewritten with only the messages still kept when it grows
/// past `compactBytes`. One file per message, `<messageId>.simp` (what earlier versions wrote),
/// is still read and removed.
///
/// With end to end, the outbox uses the device's end-to-end journal (`usingJournal`): its
/// records go into the journal's next commit instead of the log, so that the burst's messages
/// and the ratchet steps that sealed them are made durable by **one** write and one fsync
/// (docs/E2E.md §15); the journal folds them into the log when it is checkpointed (`fold`).
/// `load` reads the log, then the records still in the journal (newer).
///
/// Whatever is kept when the process ends (quit, crash, `kill -9`) is resent, with the same ids
/// so receivers drop copies they already have, by the next client of that user on that device
/// (`SIMPClient.resendOutbox`). A `DeviceLock` makes that client the only one using the directory.
public final class Outbox: Sendable {
    /// The directory holding the messages.
    public let directory: URL

    /// The lock that makes this process the outbox's only user, held as long as the outbox.
    public let lock: DeviceLock?

    /// The log's size past which `sync` rewrites it with the messages still kept.
    public let compactBytes: Int

    private struct Log {
        var descriptor: Int32 = -1
        /// Whether records were appended since the last `sync`.
        var unsynced = false
        /// Whether the log file was created by this process and its directory not yet synced.
        var created = false
        var length = 0
    }

    private let log = NIOLockedValueBox(Log())
    /// The end-to-end journal the records go into (`usingJournal`), if any.
    private let journal = NIOLockedValueBox<EndToEndFileStore?>(nil)
    /// Where the device's end-to-end journal is (read by `load`).
    private let journalDirectory: URL

    /// The outbox of `user` on `device` under `home` (created, private to the user, if
    /// missing); `lock` (the device's) is kept as long as the outbox.
    public init(home: URL, user: String, device: String, holding lock: DeviceLock? = nil, compactBytes: Int = 256 * 1024) throws {
        self.lock = lock
        self.compactBytes = compactBytes
        directory = home.appendingPathComponent("outbox").appendingPathComponent(SIMPHome.safeComponent(user))
            .appendingPathComponent(device + ".outbox")
        journalDirectory = EndToEndFileStore.directory(home: home, user: user, device: device)
        do { try SIMPHome.makeDirectory(directory) } catch {
            throw DeviceError("cannot create the outbox \(directory.path): \(error.localizedDescription)")
        }
    }

    deinit { log.withLockedValue { if $0.descriptor >= 0 { close($0.descriptor) } } }

    static let logName = "outbox.log"
    private var logPath: String { directory.appendingPathComponent(Self.logName).path }

    /// From now on the records go into `store`'s journal (which groups its commits), made
    /// durable by its commits; the journal folds them into this outbox's log.
    func usingJournal(_ store: EndToEndFileStore) {
        guard store.groupsCommits else { return }
        journal.withLockedValue { $0 = store }
        store.foldOutbox = { [self] in try fold($0) }
    }

    /// Keeps `message` (its `messageId` set): appended to the log, durable at the next `sync`.
    /// On a failure (a full disk) nothing of it is in the log.
    public func save(_ message: SIMPMessage) throws {
        try append([0x01] + Array(buffer: MessageCodec.encode(message)))
    }

    /// Makes every message saved since the last call durable (one `fdatasync`; the directory
    /// too when the log is new). On a failure they are not: save them again later. With a
    /// journal, its commit (which holds the end-to-end state saved since, too).
    public func sync() throws {
        if let store = journal.withLockedValue({ $0 }) { return try store.commit() }
        try syncLog()
    }

    private func syncLog() throws {
        try log.withLockedValue { log in
            guard log.unsynced || log.created else { return }
            guard fdatasync(log.descriptor) == 0 else { throw DeviceError("cannot write \(logPath): \(String(cString: strerror(errno)))") }
            if log.created { try Self.syncDirectory(directory) }
            (log.unsynced, log.created) = (false, false)
            if log.length > compactBytes { try? compact(&log) } // the log holds it all: a failure only delays this
        }
    }

    /// Whether messages were saved since the last `sync`.
    public var hasUnsyncedSaves: Bool { journal.withLockedValue { $0?.hasUncommittedChanges } ?? log.withLockedValue { $0.unsynced } }

    /// Appends `records` (taken from the journal, in order) to the log and makes them durable.
    func fold(_ records: [[UInt8]]) throws {
        for body in records { try appendToLog(body) }
        try syncLog()
    }

    /// Forgets message `messageId` (its outcome is known). Not synced: should a crash lose it,
    /// the message is sent again with its id, and its receiver drops the copy.
    public func remove(_ messageId: UInt64) {
        var record = ByteWriter()
        record.u8(0x02)
        record.u64(messageId)
        try? append(record.bytes, waitsForSync: false)
        unlink(directory.appendingPathComponent("\(messageId).simp").path)
    }

    /// The messages waiting, oldest (lowest id) first. Files that do not decode as a content
    /// message are set aside as `<name>.bad` and reported in `unreadable`.
    public func load() -> (messages: [SIMPMessage], unreadable: [String]) {
        var kept = Self.replay(Array(FileManager.default.contents(atPath: logPath) ?? Data())).kept
        for body in EndToEndFileStore.outboxRecords(inJournalIn: journalDirectory) { Self.apply(body, to: &kept) }
        var unreadable: [String] = []
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        for name in names {
            let file = directory.appendingPathComponent(name)
            if name.hasSuffix(".partial") { // a save that never finished: never transmitted
                try? FileManager.default.removeItem(at: file)
                continue
            }
            guard name.hasSuffix(".simp") else { continue }
            guard let data = try? Data(contentsOf: file), let message = Self.decode(Array(data)), "\(message.messageId).simp" == name else {
                try? FileManager.default.moveItem(at: file, to: file.appendingPathExtension("bad"))
                unreadable.append(name)
                continue
            }
            kept[message.messageId] = message
        }
        return (kept.values.sorted { $0.messageId < $1.messageId }, unreadable)
    }

    /// How many messages are waiting.
    public var count: Int { load().messages.count }

    private static func decode(_ bytes: [UInt8]) -> SIMPMessage? {
        guard let message = try? MessageCodec.decode(ByteBuffer(bytes: bytes)), message.kind.isContent, message.messageId != 0 else { return nil }
        return message
    }

    /// The messages a log keeps, and the length of its valid records.
    private static func replay(_ bytes: [UInt8]) -> (kept: [UInt64: SIMPMessage], length: Int) {
        var reader = ByteReader(bytes, reading: logName)
        var kept: [UInt64: SIMPMessage] = [:]
        var valid = 0
        while let body = try? record(&reader) {
            valid = reader.offset
            apply(body, to: &kept)
        }
        return (kept, valid)
    }

    /// Replays one record body: a message kept, or one whose outcome is known.
    private static func apply(_ body: [UInt8], to kept: inout [UInt64: SIMPMessage]) {
        if body.first == 0x01, let message = decode(Array(body.dropFirst())) {
            kept[message.messageId] = message
        } else if body.first == 0x02, body.count == 9 {
            kept[body[1...].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }] = nil
        }
    }

    private static func record(_ reader: inout ByteReader) throws -> [UInt8] {
        let length = Int(try reader.u32()), sum = try reader.u64()
        let body = try reader.raw(length)
        guard EndToEndFileStore.checksum(body) == sum else { throw DeviceError("a damaged record") }
        return body
    }

    private static func framed(_ body: [UInt8]) -> [UInt8] {
        var writer = ByteWriter()
        writer.u32(UInt32(body.count))
        writer.u64(EndToEndFileStore.checksum(body))
        writer.raw(body)
        return writer.bytes
    }

    /// Appends a record: to the journal's next commit when there is one, else to the log.
    private func append(_ body: [UInt8], waitsForSync: Bool = true) throws {
        if let store = journal.withLockedValue({ $0 }) { return store.appendOutboxRecord(body, waitsForCommit: waitsForSync) }
        try appendToLog(body)
    }

    private func appendToLog(_ body: [UInt8]) throws {
        try log.withLockedValue { log in
            try open(&log)
            let bytes = Self.framed(body)
            let written = bytes.withUnsafeBytes { pwrite(log.descriptor, $0.baseAddress, $0.count, off_t(log.length)) }
            guard written == bytes.count else {
                let reason = written < 0 ? String(cString: strerror(errno)) : "No space left on device"
                _ = ftruncate(log.descriptor, off_t(log.length))
                throw DeviceError("cannot save in \(logPath): \(reason)")
            }
            log.length += bytes.count
            log.unsynced = true
        }
    }

    /// Opens the log for appending, cutting away a record a crash left unfinished. A log
    /// that is no longer at its path (the directory was moved or replaced) is opened again
    /// there: what is appended must be where the next process looks.
    private func open(_ log: inout Log) throws {
        if log.descriptor >= 0 {
            var atPath = stat(), open = stat()
            guard stat(logPath, &atPath) != 0 || fstat(log.descriptor, &open) != 0 || atPath.st_ino != open.st_ino else { return }
            close(log.descriptor)
            log.descriptor = -1
        }
        let existed = FileManager.default.fileExists(atPath: logPath)
        let descriptor = Glibc.open(logPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw DeviceError("cannot save in \(logPath): \(String(cString: strerror(errno)))") }
        log.descriptor = descriptor
        log.length = Self.replay(Array(FileManager.default.contents(atPath: logPath) ?? Data())).length
        _ = ftruncate(descriptor, off_t(log.length))
        log.created = !existed
    }

    /// Writes the messages still kept into a new log beside, fsynced, and renames it into place.
    private func compact(_ log: inout Log) throws {
        let kept = Self.replay(Array(FileManager.default.contents(atPath: logPath) ?? Data())).kept
        let bytes = kept.values.sorted { $0.messageId < $1.messageId }.flatMap { Self.framed([0x01] + Array(buffer: MessageCodec.encode($0))) }
        let beside = logPath + ".new"
        let descriptor = Glibc.open(beside, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw DeviceError("cannot write \(beside): \(String(cString: strerror(errno)))") }
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == bytes.count, fdatasync(descriptor) == 0, rename(beside, logPath) == 0 else {
            close(descriptor)
            unlink(beside)
            throw DeviceError("cannot write \(beside): \(String(cString: strerror(errno)))")
        }
        close(log.descriptor)
        (log.descriptor, log.length) = (descriptor, bytes.count)
        try Self.syncDirectory(directory)
    }

    /// Fsyncs `directory`, so that a file created or renamed in it survives a power loss.
    static func syncDirectory(_ directory: URL) throws {
        let descriptor = Glibc.open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw DeviceError("cannot open \(directory.path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw DeviceError("cannot sync \(directory.path): \(String(cString: strerror(errno)))") }
    }
}
