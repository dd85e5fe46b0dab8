import Foundation
import NIOCore
import SIMPCore

#if canImport(Glibc)
import Glibc
#endif

/// A bare, non-blocking TCP connection for abuse tests and `simp-bench abuse`: it writes what it is told and reads
/// nothing unless asked (a client that never reads its answers), without an event loop of its
/// own, so a test can hold thousands (idle ones, half-sent frames).
public final class AttackSocket: @unchecked Sendable {
    private var fd: Int32

    /// Connects to 127.0.0.1:`port` from `source` (any address of 127.0.0.0/8).
    public init(port: Int, from source: String) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw AttackSocketError("socket: \(String(cString: strerror(errno)))") }
        var local = sockaddr_in(), remote = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, source, &local.sin_addr)
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        let connected = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, connected == 0 else {
            let text = String(cString: strerror(errno))
            Glibc.close(fd)
            throw AttackSocketError("connect from \(source): \(text)")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    deinit { close() }

    /// The bytes of `messages` as frames.
    public static func frames(_ messages: [SIMPMessage]) -> [UInt8] {
        var buffer = ByteBuffer()
        for message in messages { Framing.writeFrame(message, into: &buffer) }
        return Array(buffer.readableBytesView)
    }

    /// Writes as much of `bytes` as the socket takes now; returns how many it took (0: its
    /// buffer is full, the peer is not reading).
    @discardableResult
    public func write(_ bytes: [UInt8]) -> Int {
        guard fd >= 0 else { return 0 }
        let written = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        return max(0, written)
    }

    /// Whether the peer closed the connection (what it sent before is read and dropped).
    public var isClosedByPeer: Bool { drain().closed }

    /// Reads and drops what the peer sent so far: how many bytes, and whether it closed the
    /// connection.
    public func drain() -> (bytes: Int, closed: Bool) {
        guard fd >= 0 else { return (0, true) }
        var scratch = [UInt8](repeating: 0, count: 4096), bytes = 0
        while true {
            let count = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count > 0 {
                bytes += count
                continue
            }
            return (bytes, count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
        }
    }

    /// Closes the socket (once).
    public func close() {
        guard fd >= 0 else { return }
        Glibc.close(fd)
        fd = -1
    }

    /// Raises this process's soft limit of open files to its hard limit (children started
    /// afterwards inherit it); returns the limit now.
    @discardableResult
    public static func raiseOpenFileLimit() -> Int {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        return openFileLimit
    }

    /// The soft limit of open files of this process.
    public static var openFileLimit: Int {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        return Int(clamping: limit.rlim_cur)
    }
}

/// Why an `AttackSocket` could not connect.
public struct AttackSocketError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
