import CNetworkNamespace
import Foundation
import Glibc

/// Why this machine cannot run the file lab's real TCP transfer (not root, no /dev/net/tun, no
/// network namespaces).
public struct RealTCPUnavailable: Error, CustomStringConvertible {
    public var reason: String
    public var description: String { "real TCP through the impairment is skipped: \(reason)" }
}

/// Two network namespaces of this process's own, joined only through this process, for a real
/// kernel TCP connection whose every packet the lab can lose, delay or queue
/// (`TunnelForwarder`): each namespace holds one TUN device, `simp0`, the sender's side with
/// 10.77.0.1/24 and the receiver's with 10.77.0.2/24, and one TCP socket (the sender's, not yet
/// connected; the receiver's, listening on 10.77.0.2:`port`). A packet the sender's kernel
/// routes to 10.77.0.2 is read from `senderDevice`; written to `receiverDevice`, the
/// receiver's kernel takes it as arriving from the wire, and the same the other way.
///
/// The namespaces have no name and nothing else in them; the host's own network is not
/// touched. They disappear with the last file descriptor made in them, closed by `close()` or
/// by the process's exit, so nothing is left behind after an error or a crash. Making them needs
/// root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and /dev/net/tun: `make()` throws
/// `RealTCPUnavailable`, with the reason in words, where the machine does not allow it.
final class TunnelPair: Sendable {
    typealias Unavailable = RealTCPUnavailable

    static let senderAddress: UInt32 = 0x0A4D_0001 // 10.77.0.1
    static let receiverAddress: UInt32 = 0x0A4D_0002 // 10.77.0.2
    static let port: UInt16 = 5001
    static let deviceName = "simp0"

    let senderDevice: Int32
    let receiverDevice: Int32
    /// A TCP socket in the sender's namespace, to connect to the receiver.
    let senderSocket: Int32
    /// A TCP socket in the receiver's namespace, listening on `receiverAddress`:`port`.
    let listener: Int32

    private init(senderDevice: Int32, receiverDevice: Int32, senderSocket: Int32, listener: Int32) {
        self.senderDevice = senderDevice
        self.receiverDevice = receiverDevice
        self.senderSocket = senderSocket
        self.listener = listener
    }

    /// Makes both namespaces, their devices and sockets.
    static func make() throws -> TunnelPair {
        guard geteuid() == 0 else { throw Unavailable(reason: "it needs root (network namespaces and TUN devices); this process is not") }
        guard access("/dev/net/tun", R_OK | W_OK) == 0 else {
            throw Unavailable(reason: "/dev/net/tun is missing or not usable (\(String(cString: strerror(errno))))")
        }
        let sender = try side(address: senderAddress, listening: false)
        do {
            let receiver = try side(address: receiverAddress, listening: true)
            return TunnelPair(senderDevice: sender.device, receiverDevice: receiver.device, senderSocket: sender.socket, listener: receiver.socket)
        } catch {
            Glibc.close(sender.device)
            Glibc.close(sender.socket)
            throw error
        }
    }

    /// Closes the devices and sockets made in the namespaces (those namespaces then go away).
    func close() {
        for fd in [senderDevice, receiverDevice, senderSocket, listener] { Glibc.close(fd) }
    }

    /// One namespace, made on a thread of its own: the thread moves into a new namespace, makes
    /// the device and the socket there, and moves back before it ends.
    private static func side(address: UInt32, listening: Bool) throws -> (device: Int32, socket: Int32) {
        let result = ResultBox()
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            result.value = Result { try makeSide(address: address, listening: listening) }
            done.signal()
        }
        thread.start()
        done.wait()
        return try result.value!.get()
    }

    private final class ResultBox: @unchecked Sendable { // written by the thread before the semaphore, read after
        var value: Result<(device: Int32, socket: Int32), Error>?
    }

    private static func makeSide(address: UInt32, listening: Bool) throws -> (device: Int32, socket: Int32) {
        let home = simp_netns_current()
        guard home >= 0 else { throw Unavailable(reason: "cannot open this thread's network namespace: \(text(home))") }
        defer { Glibc.close(home) }
        let unshared = simp_netns_unshare()
        guard unshared == 0 else { throw Unavailable(reason: "cannot make a network namespace: \(text(unshared))") }
        // Whatever happens next, this thread goes back to the process's namespace.
        defer { _ = simp_netns_enter(home) }
        let device = simp_tun_open(deviceName)
        guard device >= 0 else { throw Unavailable(reason: "cannot make a TUN device: \(text(device))") }
        let up = simp_interface_up(deviceName, address, 24)
        let socket = up == 0 ? Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) : -1
        guard up == 0, socket >= 0 else {
            let why = up != 0 ? text(up) : text(-errno)
            Glibc.close(device)
            throw Unavailable(reason: "cannot set up the TUN device's address or a socket beside it: \(why)")
        }
        guard listening else { return (device, socket) }
        var one: Int32 = 1
        _ = setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var local = Self.socketAddress(address, port: port)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(socket, 4) == 0 else {
            let why = text(-errno)
            Glibc.close(socket)
            Glibc.close(device)
            throw Unavailable(reason: "cannot listen on the receiver's side: \(why)")
        }
        return (device, socket)
    }

    /// `address` (host byte order) and `port` as a socket address.
    static func socketAddress(_ address: UInt32, port: UInt16) -> sockaddr_in {
        var result = sockaddr_in()
        result.sin_family = sa_family_t(AF_INET)
        result.sin_port = port.bigEndian
        result.sin_addr.s_addr = address.bigEndian
        return result
    }

    private static func text(_ negativeErrno: Int32) -> String { String(cString: strerror(-negativeErrno)) }
}
