import NIOCore
import NIOPosix

/// One bound UDP socket that sends arbitrary datagrams, for tests that send many (a
/// `RawDatagram.send` binds a socket per datagram).
public final class RawDatagramSocket: @unchecked Sendable {
    private let group: MultiThreadedEventLoopGroup
    private let channel: Channel

    private init(group: MultiThreadedEventLoopGroup, channel: Channel) {
        self.group = group
        self.channel = channel
    }

    /// Binds a socket on 127.0.0.1 and an ephemeral port.
    public static func bind() async throws -> RawDatagramSocket {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            let channel = try await DatagramBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
            return RawDatagramSocket(group: group, channel: channel)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// Sends `datagrams` to `address`, flushed once at the end.
    public func send(_ datagrams: [[UInt8]], to address: SocketAddress) async throws {
        let envelopes = datagrams.map { AddressedEnvelope(remoteAddress: address, data: channel.allocator.buffer(bytes: $0)) }
        try await channel.eventLoop.submit { [channel] in
            for envelope in envelopes { channel.write(envelope, promise: nil) }
            channel.flush()
        }.get()
    }

    public func close() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }
}
