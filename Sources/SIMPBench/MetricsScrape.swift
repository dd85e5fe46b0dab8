import NIOCore
import NIOPosix

/// A scrape of a Prometheus text endpoint (`simp-server --metrics-port`).
public struct MetricsScrape: Sendable {
    /// Each sample line's series (name with labels, as written) and value.
    public let samples: [String: Double]
    /// The exposition as served (with its `# HELP` and `# TYPE` lines).
    public let text: String

    /// Parses Prometheus text exposition; comments and malformed lines are skipped.
    public init(text: String) {
        var samples: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            samples[String(line[..<space])] = value
        }
        self.samples = samples
        self.text = text
    }

    /// The sum of every series of metric `name` (all label combinations).
    public func total(_ name: String) -> Double {
        samples.reduce(0) { sum, sample in
            let series = sample.key
            let matches = series == name || (series.hasPrefix(name + "{"))
            return matches ? sum + sample.value : sum
        }
    }

    /// The value of one series, e.g. `simp_rejected_total{reason="malformed"}`.
    public subscript(series: String) -> Double? { samples[series] }

    /// GETs `http://host:port/metrics` and parses it.
    public static func fetch(host: String, port: Int, path: String = "/metrics") async throws -> MetricsScrape {
        let text = try await HTTPGet.body(host: host, port: port, path: path)
        return MetricsScrape(text: text)
    }
}

/// A minimal HTTP/1.1 GET with `Connection: close`, enough for a metrics endpoint.
enum HTTPGet {
    static func body(host: String, port: Int, path: String) async throws -> String {
        let group = MultiThreadedEventLoopGroup.singleton
        let collector = Collector()
        let channel: Channel
        do {
            channel = try await ClientBootstrap(group: group)
                .connectTimeout(.seconds(2))
                .channelInitializer { $0.pipeline.addHandler(collector) }
                .connect(host: host, port: port).get()
        } catch {
            collector.done.fail(error)
            throw error
        }
        var request = channel.allocator.buffer(capacity: 128)
        request.writeString("GET \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nConnection: close\r\n\r\n")
        try await channel.writeAndFlush(request)
        let response = try await collector.done.futureResult.get()
        guard let headerEnd = response.range(of: "\r\n\r\n"), response.hasPrefix("HTTP/1.1 200") else {
            throw BenchError("GET \(path) from \(host):\(port) failed: \(response.prefix(80))")
        }
        return String(response[headerEnd.upperBound...])
    }

    private final class Collector: ChannelInboundHandler, @unchecked Sendable { // `bytes` is touched on its channel's loop only
        typealias InboundIn = ByteBuffer
        private var bytes: [UInt8] = []
        let done: EventLoopPromise<String>
        init() { done = MultiThreadedEventLoopGroup.singleton.next().makePromise() }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            bytes += unwrapInboundIn(data).readableBytesView
        }
        func channelInactive(context: ChannelHandlerContext) { done.succeed(String(decoding: bytes, as: UTF8.self)) }
        func errorCaught(context: ChannelHandlerContext, error: Error) {
            done.fail(error)
            context.close(promise: nil)
        }
    }
}
