import Foundation
import NIOCore
import SIMPCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Messages of one (user, device) that were sent but whose outcome is not known yet, kept on
/// disk so they outlive the process: `<home>/outbox/<user>/<device>.outbox/<messageId>.simp`,
/// one file per message holding its protobuf encoding (the datagram payload of
/// docs/PROTOCOL.md §2, with its original `messageId`).
///
/// A message is saved before its first transmission and removed when its outcome is known:
/// the receipt, STORED (the relay has it), or a final failure. Whatever is left when the
/// process ends (quit, crash, `kill -9`) is resent, with the same ids so receivers drop copies
/// they already have, by the next client of that user on that device (`SIMPClient.resendOutbox`).
/// A `DeviceLock` makes that client the only one using the directory.
public final class Outbox: Sendable { // no state but its directory: every call goes to the file system
    /// The directory holding the messages.
    public let directory: URL

    /// The lock that makes this process the outbox's only user, held as long as the outbox.
    public let lock: DeviceLock?

    /// The outbox of `user` on `device` under `home` (created, private to the user, if
    /// missing); `lock` (the device's) is kept as long as the outbox.
    public init(home: URL, user: String, device: String, holding lock: DeviceLock? = nil) throws {
        self.lock = lock
        directory = home.appendingPathComponent("outbox").appendingPathComponent(SIMPHome.safeComponent(user))
            .appendingPathComponent(device + ".outbox")
        do { try SIMPHome.makeDirectory(directory) } catch {
            throw DeviceError("cannot create the outbox \(directory.path): \(error.localizedDescription)")
        }
    }

    /// Saves `message` (its `messageId` set) under its id. The file appears whole or not at
    /// all: it is written beside and renamed into place.
    public func save(_ message: SIMPMessage) throws {
        let buffer = MessageCodec.encode(message)
        let file = url(of: message.messageId).path
        let partial = file + ".partial"
        let descriptor = open(partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw DeviceError("cannot save \(partial): \(String(cString: strerror(errno)))") }
        let written = buffer.readableBytesView.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        guard written == buffer.readableBytes, rename(partial, file) == 0 else {
            unlink(partial)
            throw DeviceError("cannot save \(file): \(String(cString: strerror(errno)))")
        }
    }

    /// Forgets message `messageId` (its outcome is known). Nothing happens if it is not there.
    public func remove(_ messageId: UInt64) {
        unlink(url(of: messageId).path)
    }

    /// The messages waiting, oldest (lowest id) first. Files that do not decode as a content
    /// message are set aside as `<name>.bad` and reported in `unreadable`.
    public func load() -> (messages: [SIMPMessage], unreadable: [String]) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        var messages: [SIMPMessage] = []
        var unreadable: [String] = []
        for name in names {
            let file = directory.appendingPathComponent(name)
            if name.hasSuffix(".partial") { // a save that never finished: never transmitted
                try? FileManager.default.removeItem(at: file)
                continue
            }
            guard name.hasSuffix(".simp") else { continue }
            guard let data = try? Data(contentsOf: file),
                let message = try? MessageCodec.decode(ByteBuffer(bytes: data)),
                message.kind.isContent, message.messageId != 0, "\(message.messageId).simp" == name
            else {
                try? FileManager.default.moveItem(at: file, to: file.appendingPathExtension("bad"))
                unreadable.append(name)
                continue
            }
            messages.append(message)
        }
        return (messages.sorted { $0.messageId < $1.messageId }, unreadable)
    }

    /// How many messages are waiting.
    public var count: Int { load().messages.count }

    private func url(of messageId: UInt64) -> URL {
        directory.appendingPathComponent("\(messageId).simp")
    }
}
