import NIOCore
import SIMPCore

/// Steers the datagrams arriving at a UDP port shared by several relays of one process
/// (`SO_REUSEPORT`) to the relay holding their session: a classic BPF program attached to the
/// port's socket group reads the low 32 bits of the session id from the sealed header and
/// returns the id modulo the number of sockets — the index of the socket (sockets join the
/// group in the order they are bound) whose relay hands out that class of ids
/// (`SessionIdClass`). The kernel runs it with the UDP payload at offset 0; a datagram too
/// short to hold an id goes to socket 0, which drops it as malformed.
enum ReusePortSteering {
    /// `struct sock_filter` from <linux/filter.h>.
    private struct Instruction {
        var code: UInt16
        var jumpTrue: UInt8 = 0
        var jumpFalse: UInt8 = 0
        var k: UInt32
    }

    /// `struct sock_fprog`: the program's length and address (the program outlives the process's
    /// sockets: one is made per socket count and never freed).
    private struct Program: @unchecked Sendable { // the address points at an immutable, never-freed program
        var length: UInt16
        var instructions: UnsafeMutablePointer<Instruction>
    }

    /// `SO_REUSEPORT`: sockets of one user may bind the same port and form a group.
    static let reusePort = ChannelOptions.Types.SocketOption(level: .socket, name: NIOBSDSocket.Option(rawValue: 15))
    private static let attachReusePortCBPF = NIOBSDSocket.Option(rawValue: 51) // SO_ATTACH_REUSEPORT_CBPF (Linux)
    /// Offset of the session id's low 32 bits in a sealed datagram (marker, then the id big-endian).
    static let sessionIdLowWordOffset: UInt32 = 5

    /// The program for `count` sockets: `A = word at 5; A %= count; return A`.
    private static func program(sockets count: UInt32) -> Program {
        let instructions = UnsafeMutablePointer<Instruction>.allocate(capacity: 3)
        instructions.initialize(
            from: [
                Instruction(code: 0x20, k: sessionIdLowWordOffset), // BPF_LD | BPF_W | BPF_ABS
                Instruction(code: 0x94, k: count), // BPF_ALU | BPF_MOD | BPF_K
                Instruction(code: 0x16, k: 0), // BPF_RET | BPF_A
            ], count: 3)
        return Program(length: 3, instructions: instructions)
    }

    /// Attaches the program for `count` relays to `channel`'s socket group.
    static func attach(to channel: Channel, relays count: UInt32) async throws {
        guard let provider = channel as? SocketOptionProvider else {
            throw RelayStartError("the UDP channel cannot take socket options: --threads needs a socket")
        }
        do {
            try await provider.unsafeSetSocketOption(level: .socket, name: attachReusePortCBPF, value: program(sockets: count)).get()
        } catch {
            throw RelayStartError("could not steer datagrams between the relay's \(count) threads (SO_ATTACH_REUSEPORT_CBPF): \(error)")
        }
    }
}
