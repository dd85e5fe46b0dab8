import Foundation
import SIMPCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What `simp send --file` keeps of a transfer under way, so that the same file sent again to
/// the same user after the sender was killed resumes it (same file id, same key: the chunks
/// the receiver holds stay valid) instead of starting another. One small file under
/// `$SIMP_HOME/outgoing-files/`, named by the digest of the sender, the receiver and the file's
/// SHA-256; written (fsynced) before the announcement and removed once the receiver has the
/// file.
struct OutgoingFileRecord: Codable, Equatable {
    var fileId: UInt64
    var key: [UInt8]
    var size: UInt64
    var chunkSize: Int
    /// The file's name, kept in `held-files/` records so the relay's news that a receiver got
    /// the file can name it (nil in records written before).
    var name: String? = nil

    /// Where the record of `digest` sent by `user` to `peer` lives under `home`.
    static func path(home: URL, user: String, peer: String, digest: [UInt8]) -> URL {
        let name = FileDigest.of(Array("\(user)\u{0}\(peer)\u{0}".utf8) + digest).prefix(16).map { String(format: "%02x", $0) }.joined()
        return home.appendingPathComponent("outgoing-files").appendingPathComponent(name + ".json")
    }

    /// Where the record of `digest` sent by `user` and held whole by the relay lives under
    /// `home` (`$SIMP_HOME/held-files/`): what forwarding the relay's copy needs.
    static func heldPath(home: URL, user: String, digest: [UInt8]) -> URL {
        let name = FileDigest.of(Array("\(user)\u{0}".utf8) + digest).prefix(16).map { String(format: "%02x", $0) }.joined()
        return home.appendingPathComponent("held-files").appendingPathComponent(name + ".json")
    }

    /// The bound on the `held-files/` records: one is worth keeping only while the relay may
    /// still hold its file, which it deletes `--file-store-retention` (by default 7 days) after
    /// its last chunk was written, about when the record was written; and at most `maxHeldCount`,
    /// the newest. Dropping a record costs at most uploading its file again (a grant the relay
    /// refuses falls back to that anyway).
    static let maxHeldAge = TimeInterval(HeldFileRetention.defaultSeconds)
    /// At most this many `held-files/` records are kept: 1,000.
    static let maxHeldCount = 1000

    /// Removes the `held-files/` records under `home` older than `maxHeldAge` and the oldest
    /// beyond `maxHeldCount` (the same bound as the downloads' `.received/` records, with these
    /// limits); returns how many.
    @discardableResult
    static func pruneHeld(home: URL, now: Date = Date(), maxAge: TimeInterval = maxHeldAge, maxCount: Int = maxHeldCount) -> Int {
        ReceivedRecords.prune(home.appendingPathComponent("held-files"), now: now, maxAge: maxAge, maxCount: maxCount)
    }

    /// This record, if it is of a file of `size` bytes in chunks of `chunkSize` with a key of the right length.
    func fits(size: UInt64, chunkSize: Int) -> OutgoingFileRecord? {
        self.size == size && self.chunkSize == chunkSize && key.count == FileChunkCipher.keySize ? self : nil
    }

    /// The name of the file `fileId` in the `held-files/` records under `home` (nil: no
    /// such record, or one without a name).
    static func heldName(home: URL, fileId: UInt64) -> String? {
        let directory = home.appendingPathComponent("held-files")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        for name in names where name.hasSuffix(".json") {
            if let record = read(directory.appendingPathComponent(name)), record.fileId == fileId { return record.name }
        }
        return nil
    }

    /// The record at `path`, if there is a readable one.
    static func read(_ path: URL) -> OutgoingFileRecord? {
        FileManager.default.contents(atPath: path.path).flatMap { try? JSONDecoder().decode(OutgoingFileRecord.self, from: $0) }
    }

    /// Writes the record at `path` durably (see `DurableFile.replace`).
    func write(to path: URL) throws {
        try SIMPHome.makeDirectory(path.deletingLastPathComponent())
        try DurableFile.replace(path, with: JSONEncoder().encode(self))
    }
}

/// Small records written so that a crash leaves the old version or the new one, never a mix.
enum DurableFile {
    /// Writes `data` to a temporary file beside `path`, fsyncs it and renames it over `path`.
    static func replace(_ path: URL, with data: Data) throws {
        let temporary = path.appendingPathExtension("tmp")
        guard FileManager.default.createFile(atPath: temporary.path, contents: data) else {
            throw DeviceError("cannot write \(temporary.path)")
        }
        let handle = try FileHandle(forWritingTo: temporary)
        try? handle.synchronize()
        try? handle.close()
        guard rename(temporary.path, path.path) == 0 else { throw DeviceError("cannot rename \(temporary.path) to \(path.path)") }
    }
}
