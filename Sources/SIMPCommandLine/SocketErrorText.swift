import Foundation
import NIOCore
import NIOPosix

/// Short, actionable text for socket errors (NIO's own descriptions name internal types:
/// `Connection errors: SingleConnectionFailure(target: [IPv4]…) (errno: 111)`).
public enum SocketErrorText {
    /// What went wrong, in a few words: `connection refused`, `timed out after 5 s`,
    /// `cannot resolve the host name`.
    public static func reason(_ error: Error) -> String {
        switch error {
        case let error as NIOConnectionError:
            if let first = error.connectionErrors.first { return reason(first.error) }
            if error.dnsAError != nil || error.dnsAAAAError != nil { return "cannot resolve the host name" }
            return "no address to connect to"
        case let error as IOError:
            return errnoText(error.errnoCode)
        case ChannelError.connectTimeout(let timeout):
            return "timed out after \(Double(timeout.nanoseconds) / 1e9) s"
        default: // an error that wraps one and keeps only its text (a Redis client's)
            let text = "\(error)"
            if let code = errnoCode(in: text) { return errnoText(code) }
            if text.contains("UnknownHost") { return "cannot resolve the host name" }
            if text.contains("connectTimeout") { return "timed out" }
            return text
        }
    }

    /// The last `(errno: N)` in the text of an error that wraps a system call's.
    private static func errnoCode(in text: String) -> Int32? {
        guard let start = text.range(of: "(errno: ", options: .backwards) else { return nil }
        return Int32(text[start.upperBound...].prefix { $0.isNumber })
    }

    /// Whether `error` says an address is already in use (EADDRINUSE), itself or in the text
    /// of an error that wraps it.
    public static func isAddressInUse(_ error: Error) -> Bool {
        if let error = error as? IOError { return error.errnoCode == EADDRINUSE }
        return errnoCode(in: "\(error)") == EADDRINUSE
    }

    /// Which of the `ports` (name and number; 0 is skipped) another process holds on `host`,
    /// found by trying to bind each: for the message when a listener could not start.
    public static func portsInUse(host: String, _ ports: [(name: String, port: Int, udp: Bool)]) -> [String] {
        ports.filter { $0.port > 0 && !canBind(host: host, port: $0.port, udp: $0.udp) }
            .map { "\($0.udp ? "UDP" : "TCP") port \($0.port) (\($0.name))" }
    }

    private static func canBind(host: String, port: Int, udp: Bool) -> Bool {
        guard let address = try? SocketAddress.makeAddressResolvingHost(host, port: port) else { return true }
        let descriptor = socket(address.protocol.rawValue, udp ? Int32(SOCK_DGRAM.rawValue) : Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return true }
        defer { close(descriptor) }
        if !udp { // a TCP port in TIME_WAIT is free for a listener; one with a listener is not
            var reuse: Int32 = 1
            setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        }
        return address.withSockAddr { pointer, size in bind(descriptor, pointer, socklen_t(size)) } == 0
    }

    private static func errnoText(_ code: Int32) -> String {
        String(cString: strerror(code)).lowercased()
    }
}
