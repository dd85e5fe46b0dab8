import NIOCore
import NIOPosix
import SIMPCore

/// Many registered users that do nothing but answer PING: the `--sessions` load on a relay's
/// memory. They share one UDP socket (a registration needs a port, not a socket of its own).
public final class IdleSessions: @unchecked Sendable {
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private var channels: [Channel] = []
    private var datagrams: Channel?

    public init() {}

    /// Registers `count` users named `<prefix>-idle-<n>`, `concurrency` at a time; returns how
    /// many are connected.
    public func connect(count: Int, prefix: String, host: String, port: Int, localHost: String, concurrency: Int = 128) async throws -> Int {
        let loop = group.next()
        let udp = try await loop.flatSubmit {
            BenchConnector.bindDatagramSocket(host: localHost, handler: DiscardDatagramHandler(), on: loop)
        }.get()
        datagrams = udp
        let udpPort = udp.localAddress!.port!
        var next = 0
        while next < count {
            let batch = next..<min(count, next + concurrency)
            next = batch.upperBound
            let sessions = try await loop.flatSubmit {
                EventLoopFuture.whenAllSucceed(
                    batch.map { index in
                        BenchConnector.register(
                            user: "\(prefix)-idle-\(index)", udpPort: udpPort, host: host, port: port,
                            handler: BenchControlHandler(), on: loop)
                    }, on: loop)
            }.get()
            channels += sessions.map(\.control)
        }
        return channels.count
    }

    /// Disconnects every session.
    public func close() async {
        for channel in channels { channel.close(promise: nil) }
        try? await datagrams?.close()
        try? await group.shutdownGracefully()
    }
}
