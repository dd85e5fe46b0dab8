#if canImport(Glibc)
import Glibc
#endif

/// Ports on 127.0.0.1 that were free a moment ago, found by binding port 0 and closing the
/// socket (no event loop involved, nothing waits on one).
public enum FreePort {
    /// A TCP port on 127.0.0.1.
    public static func tcp() throws -> Int { try find(type: Int32(SOCK_STREAM.rawValue)) }
    /// A UDP port on 127.0.0.1.
    public static func udp() throws -> Int { try find(type: Int32(SOCK_DGRAM.rawValue)) }

    private static func find(type: Int32) throws -> Int {
        let socket = Glibc.socket(AF_INET, type, 0)
        guard socket >= 0 else { throw FreePortError(errno: errno) }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(socket, generic, length) == 0 && getsockname(socket, generic, &length) == 0
            }
        }
        guard bound else { throw FreePortError(errno: errno) }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// No free port could be found (the system's error number says why).
public struct FreePortError: Error, CustomStringConvertible {
    public let errno: Int32
    public var description: String { "no free port on 127.0.0.1 (errno \(errno))" }
}
