import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The client's local directory: `$SIMP_HOME`, else `~/.simp`. It holds the default device
/// name, device locks, the outbox, `simp listen`'s record of what it printed (`received/`) and
/// (by default) the history.
public enum SIMPHome {
    /// `$SIMP_HOME`, else `~/.simp` (not created here).
    public static func directory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let home = environment["SIMP_HOME"], !home.isEmpty { return URL(fileURLWithPath: home) }
        let home = environment["HOME"].map { URL(fileURLWithPath: $0) } ?? FileManager.default.homeDirectoryForCurrentUser
        return home.appendingPathComponent(".simp")
    }

    /// A name usable as one path component for `user` (`/` and other odd characters become `_`).
    static func safeComponent(_ name: String) -> String {
        let safe = String(name.map { $0.isLetter || $0.isNumber || "-_.@".contains($0) ? $0 : "_" })
        return safe.hasPrefix(".") ? "_" + safe : safe
    }

    /// Creates `url` (and its parents) private to the user if it is missing. A failure is a
    /// `DeviceError` naming the path and why (e.g. a file where a directory should be), not
    /// Foundation's error.
    static func makeDirectory(_ url: URL) throws {
        do {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw DeviceError("cannot create the directory \(url.path): \(reason(creating: url)) (set SIMP_HOME to another directory)")
        }
    }

    /// Why `url` or one of its parents cannot be created as a directory.
    private static func reason(creating url: URL) -> String {
        var path = url
        while path.path != "/" {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path.path, isDirectory: &isDirectory) {
                return isDirectory.boolValue ? "permission denied in \(path.path)" : "\(path.path) is a file, not a directory"
            }
            path = path.deletingLastPathComponent()
        }
        return "it cannot be created"
    }
}

/// Device names: what a session calls the device it runs on (docs/PROTOCOL.md §4.7). A user's
/// sessions on different devices live side by side; a newer session of the same device
/// replaces the older one.
public enum DeviceName {
    /// The longest name, in bytes.
    public static let maximumLength = 64

    /// Why `name` is not a device name, or nil if it is one: 1–64 bytes of `[A-Za-z0-9._-]`.
    public static func problem(with name: String) -> String? {
        if name.isEmpty { return "a device name must not be empty" }
        if name.utf8.count > maximumLength { return "device name \"\(name)\" is longer than \(maximumLength) bytes" }
        let allowed = name.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: ".")
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }
        return allowed ? nil : "device name \"\(name)\" may only contain letters A-Z and a-z, digits, '.', '_' and '-'"
    }

    /// This machine's default device name, kept in `<home>/device` and created there once:
    /// two random words and four random hex digits (`RandomDeviceName`), e.g. `amber-otter-3fa2`;
    /// not the host name, which would tell other users (who see device names) about the
    /// machine. A file that holds no valid name is an error naming it.
    public static func standard(home: URL) throws -> String {
        let file = home.appendingPathComponent("device")
        if let text = try? String(contentsOf: file, encoding: .utf8) {
            let name = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if let problem = problem(with: name) { throw DeviceError("\(file.path): \(problem)") }
            return name
        }
        try SIMPHome.makeDirectory(home)
        var random = SystemRandomNumberGenerator()
        let name = RandomDeviceName.make(using: &random)
        do { try Data((name + "\n").utf8).write(to: file, options: .withoutOverwriting) } catch {
            // Another client created it first: use theirs.
            if let text = try? String(contentsOf: file, encoding: .utf8), problem(with: text.trimmingCharacters(in: .whitespacesAndNewlines)) == nil {
                return text.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            throw DeviceError("cannot create \(file.path): \(error.localizedDescription)")
        }
        return name
    }

    /// How many clients of one user may run at once on the default device names.
    public static let defaultNames = 64

    /// The names tried, in turn, when the default `base` is in use by another running client:
    /// `base`, `base-2`, … `base-64`.
    static func candidates(_ base: String) -> [String] {
        [base] + (2...defaultNames).map { "\(base.prefix(maximumLength - 3))-\($0)" }
    }
}

/// Why a device could not be used.
public struct DeviceError: Error, CustomStringConvertible, Equatable {
    public let description: String
    /// The device is held by another running client (rather than: the files could not be used).
    public let inUse: Bool
    public init(_ description: String, inUse: Bool = false) {
        self.description = description
        self.inUse = inUse
    }
}

/// A device in use by this process: an exclusive `flock` on
/// `<home>/devices/<user>/<device>.lock`, held until `release()` or the process ends (even by
/// `kill -9`), so two clients running at once on one machine never share a (user, device),
/// its session or its outbox.
public final class DeviceLock: Sendable {
    /// The device this lock holds.
    public let device: String
    /// The lock file.
    public let url: URL
    /// The open lock file; nil once released.
    private let descriptor: NIOLockedValueBox<Int32?>

    private init(device: String, url: URL, descriptor: Int32) {
        self.device = device
        self.url = url
        self.descriptor = NIOLockedValueBox(descriptor)
    }

    deinit { release() }

    /// Locks `device` of `user`, or, without one, the first free name of this machine's default
    /// device (`DeviceName.standard`, then `-2`, `-3` …). An explicit device held by another
    /// running client is an error that names it (and that client's process id).
    public static func acquire(home: URL, user: String, device: String?) throws -> DeviceLock {
        let directory = home.appendingPathComponent("devices").appendingPathComponent(SIMPHome.safeComponent(user))
        if let device {
            if let problem = DeviceName.problem(with: device) { throw DeviceError(problem) }
            try SIMPHome.makeDirectory(directory)
            if let lock = try lock(device, in: directory) { return lock }
            let holder = holderDescription(directory.appendingPathComponent(device + ".lock"))
            throw DeviceError("device \"\(device)\" of \(user) is in use by another running simp\(holder); give another --device NAME", inUse: true)
        }
        let base = try DeviceName.standard(home: home)
        try SIMPHome.makeDirectory(directory)
        for candidate in DeviceName.candidates(base) {
            if let lock = try lock(candidate, in: directory) { return lock }
        }
        throw DeviceError(
            "all default devices of \(user) (\(base) to \(base)-\(DeviceName.defaultNames)) are in use by running clients; give --device NAME",
            inUse: true)
    }

    /// Unlocks (closing the file); the device may then be used by another client.
    public func release() {
        descriptor.withLockedValue { open in
            if let open { close(open) }
            open = nil
        }
    }

    /// Tries to lock `device`'s file in `directory`: nil if another process holds it.
    private static func lock(_ device: String, in directory: URL) throws -> DeviceLock? {
        let url = directory.appendingPathComponent(device + ".lock")
        let descriptor = open(url.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw DeviceError("cannot open \(url.path): \(String(cString: strerror(errno)))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let failure = errno
            close(descriptor)
            if failure == EWOULDBLOCK { return nil }
            throw DeviceError("cannot lock \(url.path): \(String(cString: strerror(failure)))")
        }
        // Say who holds it, for the error another client prints.
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(descriptor, 0)
        _ = pid.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        return DeviceLock(device: device, url: url, descriptor: descriptor)
    }

    private static func holderDescription(_ url: URL) -> String {
        holder(of: url).map { " (process \($0))" } ?? ""
    }

    /// The process id of the running client that holds `device` of `user` (as its lock file
    /// says), nil when it is free or the file names none. Creates nothing.
    public static func holder(home: URL, user: String, device: String) -> Int? {
        let url = home.appendingPathComponent("devices").appendingPathComponent(SIMPHome.safeComponent(user))
            .appendingPathComponent(device + ".lock")
        let descriptor = open(url.path, O_RDWR | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        guard flock(descriptor, LOCK_EX | LOCK_NB) != 0 else { return nil } // free (unlocked again as it closes)
        return holder(of: url)
    }

    private static func holder(of url: URL) -> Int? {
        guard let text = try? String(contentsOf: url, encoding: .utf8) else { return nil }
        return Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
