import Foundation
import Glibc
import NIOConcurrencyHelpers
import NIOCore

/// The file lab's TCP row in real mode: the kernel's own TCP (its congestion control, CUBIC by
/// default on Linux, SACK, RACK, timestamps) sends the file from one `TunnelPair` namespace to
/// the other, every packet through the `TunnelForwarder`'s bottleneck and impaired links, with
/// the congestion control asked for (CUBIC in the file lab, as the lab's TCP model). The
/// time counts from the connection's first SYN to the receiver's read of the last byte.
enum RealTCPTransfer {
    /// Sends `file` through a new tunnel pair shaped as `path`; throws `TunnelPair.Unavailable`
    /// where the machine does not allow it. Gives up (the transfer unfinished) after `limit`.
    /// `congestionControl` names the sender's algorithm (`cubic`, Linux's default, unless the
    /// host chose another: this machine's default is BBR).
    static func run(file: [UInt8], path: FilePathSetup, seed: UInt64, limit: TimeAmount, congestionControl: String) async throws -> TransferResult {
        let tunnel = try TunnelPair.make()
        let chosen = congestionControl.withCString { name in
            setsockopt(tunnel.senderSocket, Int32(IPPROTO_TCP), TCP_CONGESTION, name, socklen_t(strlen(name)))
        }
        guard chosen == 0 else {
            let why = String(cString: strerror(errno))
            tunnel.close()
            throw RealTCPUnavailable(reason: "the kernel has no congestion control \"\(congestionControl)\" (\(why))")
        }
        return await withCheckedContinuation { continuation in
            Thread {
                let result = transfer(file, through: tunnel, path: path, seed: seed, limit: limit)
                tunnel.close()
                continuation.resume(returning: result)
            }.start()
        }
    }

    private final class Receiving: @unchecked Sendable { // written by the receiving thread before `done`, read after
        var progress = ProgressLog()
        var completedAt: TimeAmount?
    }

    private static func transfer(_ file: [UInt8], through tunnel: TunnelPair, path: FilePathSetup, seed: UInt64, limit: TimeAmount)
        -> TransferResult
    {
        let forwarder = TunnelForwarder(tunnel: tunnel, path: path, seed: seed)
        let start = NIODeadline.now()
        let deadline = start + limit
        forwarder.start(at: start)
        let receiving = Receiving()
        let done = DispatchSemaphore(value: 0)
        Thread {
            receive(file.count, on: tunnel.listener, into: receiving, start: start, deadline: deadline)
            done.signal()
        }.start()
        send(file, from: tunnel.senderSocket, deadline: deadline)
        done.wait()
        let counts = forwarder.stop()
        return TransferResult(
            fileBytes: file.count, completedAfter: receiving.completedAt, payloadBytesSent: counts.payloadBytes,
            wireBytesSent: counts.wireBytes, queueDrops: counts.queueDrops, retransmissions: counts.retransmissions, timeouts: 0,
            largestWindow: 0, lossesTolerated: 0, progress: receiving.progress.points, chatLatencies: [])
    }

    /// Connects and writes the whole file, then closes its side; stops at `deadline`.
    private static func send(_ file: [UInt8], from socket: Int32, deadline: NIODeadline) {
        setTimeout(socket, SO_SNDTIMEO)
        var receiver = TunnelPair.socketAddress(TunnelPair.receiverAddress, port: TunnelPair.port)
        var connected = false
        while !connected, NIODeadline.now() < deadline {
            connected =
                withUnsafePointer(to: &receiver) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                } == 0 || errno == EISCONN
            if !connected { usleep(10_000) } // the SYN is on its way (EINPROGRESS, EALREADY)
        }
        var sent = 0
        while connected, sent < file.count, NIODeadline.now() < deadline {
            let count = file.withUnsafeBytes { Glibc.send(socket, $0.baseAddress! + sent, min(file.count - sent, 1 << 16), Int32(MSG_NOSIGNAL)) }
            if count > 0 { sent += count } else if errno != EAGAIN, errno != EINTR { break }
        }
        shutdown(socket, Int32(SHUT_WR))
    }

    /// Accepts the connection and reads until the whole file arrived or `deadline`.
    private static func receive(_ size: Int, on listener: Int32, into receiving: Receiving, start: NIODeadline, deadline: NIODeadline) {
        setTimeout(listener, SO_RCVTIMEO)
        var connection: Int32 = -1
        while connection < 0, NIODeadline.now() < deadline { connection = accept(listener, nil, nil) }
        guard connection >= 0 else { return }
        defer { close(connection) }
        setTimeout(connection, SO_RCVTIMEO)
        var buffer = [UInt8](repeating: 0, count: 1 << 18)
        var held = 0
        while held < size, NIODeadline.now() < deadline {
            let count = recv(connection, &buffer, buffer.count, 0)
            if count == 0 { break }
            guard count > 0 else { continue }
            held += count
            receiving.progress.record(held: UInt64(held), at: NIODeadline.now() - start, total: UInt64(size))
        }
        if held >= size { receiving.completedAt = NIODeadline.now() - start }
    }

    /// Blocking calls on `socket` return every 200 ms, so a deadline is noticed.
    private static func setTimeout(_ socket: Int32, _ option: Int32) {
        var wait = timeval(tv_sec: 0, tv_usec: 200_000)
        _ = setsockopt(socket, SOL_SOCKET, option, &wait, socklen_t(MemoryLayout<timeval>.size))
    }
}
