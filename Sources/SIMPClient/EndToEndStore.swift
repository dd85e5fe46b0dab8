import Foundation
import NIOCore
import SIMPCore
import SIMPE2E

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A device's end-to-end state in files (docs/E2E.md §9): `<home>/e2e/<user>/<device>/`, mode
/// 0700, one file per saved name (its identity, prekeys, each pairwise session, each peer's
/// device list), mode 0600, replaced atomically (written beside, then renamed).
///
/// Each file starts with `0xF1 ‖ u64` its own inode number, then the saved bytes: a file
/// copied back from a backup (or to another machine) has another inode, so the store can tell
/// a copy from what it wrote (`isCopy`, docs/E2E.md §7.3). Files written without it (before)
/// are read as they are and are never taken for copies.
public final class EndToEndFileStore: E2EStateStore, @unchecked Sendable { // used on the client's event loop only
    public let directory: URL

    /// The state directory of `user`'s `device` under `home` (created on first save).
    public init(home: URL, user: String, device: String) {
        directory = home.appendingPathComponent("e2e").appendingPathComponent(SIMPHome.safeComponent(user))
            .appendingPathComponent(SIMPHome.safeComponent(device.isEmpty ? "default" : device))
    }

    /// The first byte of a file that starts with its inode number.
    static let inodeMark: UInt8 = 0xF1

    public func load(_ name: String) throws -> [UInt8]? {
        try read(name).map { $0.first == Self.inodeMark ? Array($0.dropFirst(9)) : $0 }
    }

    /// Whether the file of `name` is not the one this store wrote: its recorded inode is not its own.
    public func isCopy(_ name: String) throws -> Bool {
        guard let bytes = try read(name), bytes.count >= 9, bytes[0] == Self.inodeMark else { return false }
        let recorded = bytes[1..<9].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        var status = stat()
        return stat(file(name).path, &status) != 0 || recorded != UInt64(status.st_ino)
    }

    /// The file's bytes (nil when there is none). Only `isCopy` asks for its inode: `load` runs
    /// for every message sent or received.
    private func read(_ name: String) throws -> [UInt8]? {
        let url = file(name)
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        return Array(try Data(contentsOf: url))
    }

    public func save(_ name: String, _ bytes: SecretBytes) throws {
        try SIMPHome.makeDirectory(directory)
        let url = file(name), temporary = url.path + ".new"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw DeviceError("cannot write \(temporary): \(String(cString: strerror(errno)))") }
        var status = stat()
        let inode = fstat(descriptor, &status) == 0 ? UInt64(status.st_ino) : 0
        var contents = ByteWriter()
        contents.u8(Self.inodeMark)
        contents.u64(inode)
        contents.raw(bytes.bytes)
        let written = contents.bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        guard written == contents.bytes.count, rename(temporary, url.path) == 0 else {
            throw DeviceError("cannot write \(url.path): \(String(cString: strerror(errno)))")
        }
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

    static func encoded(_ held: [(message: SIMPMessage, since: UInt64)]) -> [UInt8] {
        var writer = ByteWriter()
        writer.u8(1)
        writer.u16(UInt16(held.count))
        for (message, since) in held {
            let post = Array(buffer: MessageCodec.encode(message))
            writer.u64(since)
            writer.u32(UInt32(post.count))
            writer.raw(post)
        }
        return writer.bytes
    }

    static func decoded(_ bytes: [UInt8]) throws -> [(message: SIMPMessage, since: UInt64)] {
        var reader = ByteReader(bytes, reading: "held posts")
        try reader.expectVersion(1)
        let posts = try (0..<reader.u16()).map { _ in
            let since = try reader.u64()
            let post = try reader.raw(Int(reader.u32()))
            return (message: try post.withUnsafeBytes { try MessageCodec.decode($0) }, since: since)
        }
        try reader.expectEnd()
        return posts
    }
}
