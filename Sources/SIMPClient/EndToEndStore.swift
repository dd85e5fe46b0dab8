import Foundation
import NIOCore
import SIMPCore
import SIMPE2E

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A device's end-to-end state in files (docs/E2E.md §9, §15): `<home>/e2e/<user>/<device>/`,
/// mode 0700, one file per saved name (its identity, prekeys, each pairwise session, each peer's
/// device list), mode 0600, replaced atomically (written beside, fsynced, renamed, and the
/// directory fsynced).
///
/// Each file starts with `0xF1 ‖ u64` its own inode number, then the saved bytes: a file
/// copied back from a backup (or to another machine) has another inode, so the store can tell
/// a copy from what it wrote (`isCopy`, docs/E2E.md §7.3). Files written without it (before)
/// are read as they are and are never taken for copies.
///
/// With `groupsCommits` (the client's engine sets it) a `save` only changes what the store
/// holds in memory; `commit` then writes every change since the last one as **one** record
/// appended to the device's `journal` file and fsynced: a crash keeps all of them or none.
/// The journal is folded into the files (`checkpoint`) when it has grown past
/// `checkpointBytes`, and by the first commit of a process that found one.
///
/// The device's outbox writes its records into the same journal (`appendOutboxRecord`, under
/// the name `outboxEntryName`), so that a burst of messages sealed and kept in the outbox is
/// made durable by **one** write and one fsync (docs/E2E.md §15); a checkpoint folds them into
/// the outbox's log (`Outbox.fold`) before the journal is emptied.
public final class EndToEndFileStore: E2EStateStore, @unchecked Sendable { // used on the client's event loop only
    public let directory: URL
    /// Whether saves wait for `commit` (one journal record and one fsync for all of them).
    public var groupsCommits = false
    /// The journal's size past which a commit folds it into the files.
    public var checkpointBytes = 512 * 1024

    /// What each name holds as far as this store knows (nil: nothing saved), read or saved.
    private var cache: [String: [UInt8]?] = [:]
    /// Saved since the last commit (`groupsCommits`).
    private var pending: [String: [UInt8]] = [:]
    /// Names whose newest bytes are in the journal rather than in their own file.
    private var journaled: Set<String> = []
    /// Names read from a journal that is a copy (restored from a backup) and not saved since.
    private var copied: Set<String> = []
    /// The inode of each file this store wrote as its own: while the file there has it, it is
    /// no copy, and `isCopy` need not read it (a sender may not save for many messages, §15).
    private var ownInodes: [String: UInt64] = [:]
    private var journal: Int32 = -1
    /// The journal's valid length (a record cut off by a crash is cut away at the next commit).
    private var journalLength = 0
    private var journalRead = false
    /// Outbox records appended since the last commit, in order.
    private var pendingOutbox: [[UInt8]] = []
    /// Outbox records the journal holds (written by this process or an earlier one), in order:
    /// folded into the outbox's log at the next checkpoint.
    private var journaledOutbox: [[UInt8]] = []
    /// Folds outbox records into the outbox's log, durably (`Outbox.fold`): the outbox using
    /// this journal sets it; without one, the outbox of this store's user and device.
    var foldOutbox: (([[UInt8]]) throws -> Void)?
    private let outboxOwner: (home: URL, user: String, device: String)

    /// The state directory of `user`'s `device` under `home` (created on first save).
    public init(home: URL, user: String, device: String) {
        directory = Self.directory(home: home, user: user, device: device)
        outboxOwner = (home, user, device)
    }

    /// Where `user`'s `device` under `home` keeps its state (and its journal).
    static func directory(home: URL, user: String, device: String) -> URL {
        home.appendingPathComponent("e2e").appendingPathComponent(SIMPHome.safeComponent(user))
            .appendingPathComponent(SIMPHome.safeComponent(device.isEmpty ? "default" : device))
    }

    deinit { if journal >= 0 { close(journal) } }

    /// The first byte of a file that starts with its inode number.
    static let inodeMark: UInt8 = 0xF1
    /// The first byte of the journal, followed by its inode number.
    static let journalMark: UInt8 = 0xF2
    static let journalName = "journal"
    /// The journal entry that carries one outbox record (docs/E2E.md §15); never a state name.
    static let outboxEntryName = ":outbox"

    /// Appends an outbox record (`Outbox`'s log body) to the next commit; with
    /// `waitsForCommit` false (a message whose outcome is known) it is written at once, not
    /// synced (the next commit's fsync covers it), unless records wait before it.
    func appendOutboxRecord(_ body: [UInt8], waitsForCommit: Bool = true) {
        readJournal()
        guard !waitsForCommit, pendingOutbox.isEmpty, (try? appendRecord([(Self.outboxEntryName, body)], sync: false)) != nil else {
            return pendingOutbox.append(body)
        }
        journaledOutbox.append(body)
    }

    /// The outbox records in the journal in `directory` (committed, in order): read by an outbox
    /// after its own log.
    static func outboxRecords(inJournalIn directory: URL) -> [[UInt8]] {
        guard let data = FileManager.default.contents(atPath: directory.appendingPathComponent(journalName).path),
            data.count >= journalHeaderCount, data[data.startIndex] == journalMark
        else { return [] }
        var reader = ByteReader(Array(data.dropFirst(journalHeaderCount)), reading: "journal")
        var records: [[UInt8]] = []
        while let entries = try? record(&reader) {
            records += entries.filter { $0.0 == outboxEntryName }.map(\.1)
        }
        return records
    }

    public func load(_ name: String) throws -> [UInt8]? {
        readJournal()
        if let known = cache[name] { return known }
        let bytes = try read(name).map { $0.first == Self.inodeMark ? Array($0.dropFirst(9)) : $0 }
        cache[name] = .some(bytes)
        return bytes
    }

    /// Whether the file of `name` is not the one this store wrote: its recorded inode is not its
    /// own (or its newest bytes came from a journal that is a copy).
    public func isCopy(_ name: String) throws -> Bool {
        readJournal()
        if pending[name] != nil || journaled.contains(name) { return copied.contains(name) }
        let path = file(name).path
        var status = stat()
        if let own = ownInodes[name], stat(path, &status) == 0, UInt64(status.st_ino) == own { return false }
        guard let bytes = try read(name), bytes.count >= 9, bytes[0] == Self.inodeMark else { return false }
        let recorded = bytes[1..<9].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return stat(path, &status) != 0 || recorded != UInt64(status.st_ino)
    }

    /// The file's bytes (nil when there is none).
    private func read(_ name: String) throws -> [UInt8]? {
        let url = file(name)
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        return Array(try Data(contentsOf: url))
    }

    public func save(_ name: String, _ bytes: SecretBytes) throws {
        readJournal()
        copied.remove(name)
        guard groupsCommits else {
            try SIMPHome.makeDirectory(directory)
            try writeFile(name, bytes.bytes, asCopy: false)
            try syncDirectory()
            cache[name] = .some(bytes.bytes)
            return
        }
        cache[name] = .some(bytes.bytes)
        pending[name] = bytes.bytes
    }

    /// Whether saves wait for a commit.
    public var hasUncommittedChanges: Bool { !pending.isEmpty || !pendingOutbox.isEmpty }
    /// Whether end-to-end state (not only the outbox's records) waits for a commit.
    var hasUncommittedState: Bool { !pending.isEmpty }

    /// Writes everything saved since the last commit as one journal record, fsynced. On a
    /// failure (a full disk) nothing of it is on disk, and it stays to be committed again.
    public func commit() throws {
        guard hasUncommittedChanges else { return }
        try appendRecord(pending.sorted(by: { $0.key < $1.key }) + pendingOutbox.map { (Self.outboxEntryName, $0) }, sync: true)
        journaled.formUnion(pending.keys)
        pending.removeAll(keepingCapacity: true)
        journaledOutbox += pendingOutbox
        pendingOutbox.removeAll(keepingCapacity: true)
        if journalLength > checkpointBytes { try? checkpoint() } // the journal holds it all: a failure only delays this
    }

    /// Appends one record holding `entries` to the journal (then `fdatasync` with `sync`); on
    /// a failure nothing of it is in the journal.
    private func appendRecord(_ entries: [(String, [UInt8])], sync: Bool) throws {
        try openJournalForWriting()
        var framed = ByteWriter()
        for start in stride(from: 0, to: entries.count, by: Int(UInt16.max)) { // one record unless it has more than 65,535 entries
            let chunk = entries[start..<min(start + Int(UInt16.max), entries.count)]
            var record = ByteWriter()
            record.u16(UInt16(chunk.count))
            for (name, bytes) in chunk {
                record.lengthPrefixed(Array(name.utf8))
                record.u32(UInt32(bytes.count))
                record.raw(bytes)
            }
            framed.u32(UInt32(record.bytes.count))
            framed.u64(Self.checksum(record.bytes))
            framed.raw(record.bytes)
        }
        let written = framed.bytes.withUnsafeBytes { pwrite(journal, $0.baseAddress, $0.count, off_t(journalLength)) }
        guard written == framed.bytes.count, !sync || fdatasync(journal) == 0 else {
            let reason = written < 0 || sync ? String(cString: strerror(errno)) : "No space left on device"
            _ = ftruncate(journal, off_t(journalLength))
            throw DeviceError("cannot write \(directory.appendingPathComponent(Self.journalName).path): \(reason)")
        }
        journalLength += framed.bytes.count
    }

    /// Writes each name the journal holds into its own file (fsynced, the directory too) and
    /// its outbox records into the outbox's log (fsynced), then empties the journal.
    func checkpoint() throws {
        for name in journaled.sorted() {
            guard let bytes = cache[name] ?? nil else { continue }
            try writeFile(name, bytes, asCopy: copied.contains(name))
        }
        try syncDirectory()
        if !journaledOutbox.isEmpty {
            if let foldOutbox {
                try foldOutbox(journaledOutbox)
            } else {
                try Outbox(home: outboxOwner.home, user: outboxOwner.user, device: outboxOwner.device).fold(journaledOutbox)
            }
        }
        guard ftruncate(journal, off_t(Self.journalHeaderCount)) == 0, fdatasync(journal) == 0 else {
            throw DeviceError("cannot empty \(Self.journalName): \(String(cString: strerror(errno)))")
        }
        journalLength = Self.journalHeaderCount
        journaled.removeAll()
        journaledOutbox.removeAll()
    }

    private static let journalHeaderCount = 9

    /// Reads the journal once (what another process of this device left), newest bytes winning.
    private func readJournal() {
        guard !journalRead else { return }
        journalRead = true
        let url = directory.appendingPathComponent(Self.journalName)
        guard let data = FileManager.default.contents(atPath: url.path), data.count >= Self.journalHeaderCount,
            data[data.startIndex] == Self.journalMark
        else { return }
        let bytes = Array(data)
        let recorded = bytes[1..<9].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        var status = stat()
        let isCopy = stat(url.path, &status) != 0 || recorded != UInt64(status.st_ino)
        var reader = ByteReader(Array(bytes[Self.journalHeaderCount...]), reading: "journal")
        var valid = Self.journalHeaderCount
        while let entries = try? Self.record(&reader) {
            for (name, value) in entries {
                if name == Self.outboxEntryName {
                    journaledOutbox.append(value)
                    continue
                }
                cache[name] = .some(value)
                journaled.insert(name)
                if isCopy { copied.insert(name) } else { copied.remove(name) }
            }
            valid = Self.journalHeaderCount + reader.offset
        }
        journalLength = valid
    }

    /// One record: `u32 length ‖ u64 checksum ‖ u16 n ‖ n × (str16 name ‖ u32 length ‖ bytes)`;
    /// throws at the end or at a record cut off or damaged.
    private static func record(_ reader: inout ByteReader) throws -> [(String, [UInt8])] {
        let length = Int(try reader.u32()), sum = try reader.u64()
        let body = try reader.raw(length)
        guard checksum(body) == sum else { throw E2EError.malformed("journal: a damaged record") }
        var inner = ByteReader(body, reading: "journal record")
        let entries = try (0..<inner.u16()).map { _ in
            (String(decoding: try inner.lengthPrefixed(), as: UTF8.self), try inner.raw(Int(inner.u32())))
        }
        try inner.expectEnd()
        return entries
    }

    /// FNV-1a, 64 bits: tells a record cut off or half written by a crash.
    static func checksum(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash
    }

    /// Opens the journal for appending (once). A journal that is no longer at its path (the
    /// directory was moved or replaced) is not written: what it holds is not where the next
    /// process looks, so nothing may be taken as durable (the commit fails, and is tried again).
    private func openJournalForWriting() throws {
        if journal >= 0 {
            let path = directory.appendingPathComponent(Self.journalName).path
            var atPath = stat(), open = stat()
            guard stat(path, &atPath) == 0, fstat(journal, &open) == 0, atPath.st_ino == open.st_ino, atPath.st_dev == open.st_dev else {
                throw DeviceError("cannot write \(path): the journal was moved or replaced while in use")
            }
            return
        }
        readJournal()
        try SIMPHome.makeDirectory(directory)
        let path = directory.appendingPathComponent(Self.journalName).path
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw DeviceError("cannot open \(path): \(String(cString: strerror(errno)))") }
        journal = descriptor
        if journalLength < Self.journalHeaderCount {
            var status = stat()
            var header = ByteWriter()
            header.u8(Self.journalMark)
            header.u64(fstat(descriptor, &status) == 0 ? UInt64(status.st_ino) : 0)
            let written = header.bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
            guard written == header.bytes.count, ftruncate(descriptor, off_t(header.bytes.count)) == 0, fsync(descriptor) == 0 else {
                let reason = String(cString: strerror(errno))
                close(descriptor)
                journal = -1
                throw DeviceError("cannot write \(path): \(reason)")
            }
            journalLength = header.bytes.count
            try syncDirectory()
        } else if !journaled.isEmpty || !journaledOutbox.isEmpty {
            try checkpoint() // what an earlier process left: into the files, so this journal starts empty
        }
    }

    /// Writes `name`'s file beside, fsyncs it and renames it into place. `asCopy` records no
    /// inode of its own (a copy read from a restored journal stays one).
    private func writeFile(_ name: String, _ bytes: [UInt8], asCopy: Bool) throws {
        let url = file(name), temporary = url.path + ".new"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw DeviceError("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        var status = stat()
        let inode = asCopy ? 0 : fstat(descriptor, &status) == 0 ? UInt64(status.st_ino) : 0
        var contents = ByteWriter()
        contents.u8(Self.inodeMark)
        contents.u64(inode)
        contents.raw(bytes)
        let written = contents.bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        let synced = written == contents.bytes.count && fsync(descriptor) == 0
        close(descriptor)
        guard synced, rename(temporary, url.path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw DeviceError("cannot write \(url.path): \(reason)")
        }
        ownInodes[name] = asCopy ? nil : inode
    }

    /// Fsyncs the directory, so that the renames in it survive a power loss.
    private func syncDirectory() throws {
        let descriptor = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw DeviceError("cannot open \(directory.path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw DeviceError("cannot sync \(directory.path): \(String(cString: strerror(errno)))") }
    }
    /// One file per name: bytes other than `[A-Za-z0-9._-]` (such as the `/` in `peer/bob/laptop`)
    /// are written `%XX`, and so is a leading `.`. (Called at every load and save, so for each
    /// message sent or received: bytes, not `String(format:)` per character.)
    func file(_ name: String) -> URL {
        var encoded: [UInt8] = []
        encoded.reserveCapacity(name.utf8.count)
        for byte in name.utf8 {
            if Self.isKept(byte) {
                encoded.append(byte)
            } else {
                encoded += [UInt8(ascii: "%"), Self.hexDigits[Int(byte >> 4)], Self.hexDigits[Int(byte & 0x0F)]]
            }
        }
        if encoded.first == UInt8(ascii: ".") { encoded.replaceSubrange(0..<1, with: Array("%2E".utf8)) }
        return directory.appendingPathComponent(String(decoding: encoded, as: UTF8.self))
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    private static func isKept(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"): true
        default: false
        }
    }
}

/// The room posts waiting for their author's sender key (docs/E2E.md §14.3), kept in the
/// device's store under `held` so that a process that ends first does not lose them.
/// Version 1: `0x01 ‖ u16 n ‖ n × (u64 arrival, ms since the epoch ‖ u32 length ‖ the post as
/// received, a protobuf SIMP Message)`, oldest first (docs/E2E.md §14.4).
extension RoomPosts {
    /// The name of the entry in the device's store.
    static let storeName = "held"

    static func encoded(_ held: [HeldRoomPosts.Post]) -> [UInt8] {
        var writer = ByteWriter()
        writer.u8(1)
        writer.u16(UInt16(held.count))
        for held in held {
            let post = Array(buffer: MessageCodec.encode(held.message))
            writer.u64(held.since)
            writer.u32(UInt32(post.count))
            writer.raw(post)
        }
        return writer.bytes
    }

    static func decoded(_ bytes: [UInt8]) throws -> [HeldRoomPosts.Post] {
        var reader = ByteReader(bytes, reading: "held posts")
        try reader.expectVersion(1)
        let posts = try (0..<reader.u16()).map { _ in
            let since = try reader.u64()
            let post = try reader.raw(Int(reader.u32()))
            return HeldRoomPosts.Post(message: try post.withUnsafeBytes { try MessageCodec.decode($0) }, since: since)
        }
        try reader.expectEnd()
        return posts
    }
}
