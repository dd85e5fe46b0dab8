import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus
import SIMPCore
import SIMPRedis

/// Serves a Prometheus registry as text at `GET /metrics` (anything else: 404).
///
/// Before each export, `beforeScrape` runs on the channel's event loop to bring figures that
/// are sampled rather than counted up to date, and the endpoint adds to the registry itself the
/// process (`process_*`), the build (`simp_build_info`) and, given the relay's Redis, the
/// offline inboxes in it (`simp_inbox_*`, sampled in the background by `InboxSampler` on
/// `inboxSchedule`; pass nil for a relay whose store is not Redis). A scrape reads memory only:
/// it sends Redis nothing.
enum MetricsEndpoint {
    static func bind(
        host: String, port: Int, registry: PrometheusCollectorRegistry, redis: RedisEndpoint?,
        inboxSchedule: InboxSamplingSchedule = .standard, on loop: EventLoop,
        beforeScrape: @escaping @Sendable () -> Void
    ) async throws -> Channel {
        let samplers = ScrapeSamplers(registry: registry, redis: redis, inboxSchedule: inboxSchedule, on: loop)
        let prepare: @Sendable () -> Void = {
            beforeScrape()
            samplers.sample()
        }
        do {
            let channel = try await ServerBootstrap(group: loop)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                        try channel.pipeline.syncOperations.addHandler(MetricsHTTPHandler(registry: registry, prepare: prepare))
                    }
                }
                .bind(host: host, port: port).get()
            channel.closeFuture.whenComplete { _ in Task { await samplers.shutdown() } }
            return channel
        } catch {
            await samplers.shutdown()
            throw error
        }
    }
}

/// What the endpoint samples at each scrape beside the relay's own metrics.
private struct ScrapeSamplers: Sendable {
    let process: ProcessMetrics
    let inboxes: InboxSampler?

    init(registry: PrometheusCollectorRegistry, redis: RedisEndpoint?, inboxSchedule: InboxSamplingSchedule, on loop: EventLoop) {
        process = ProcessMetrics(registry: registry)
        inboxes = redis.map { InboxSampler(redis: $0, registry: registry, on: loop, schedule: inboxSchedule) }
        inboxes?.start()
        registry.makeGauge(
            descriptor: MetricNameDescriptor(
                metricName: "simp_build_info", unitName: "",
                helpText: "Always 1; the label says which SIMP version the relay runs."),
            labels: [("version", SIMPVersion.current)]
        ).set(to: 1)
    }

    /// Brings the sampled figures up to date from memory (on the endpoint's loop).
    func sample() {
        inboxes?.publish()
        process.update()
    }

    func shutdown() async { await inboxes?.shutdown() }
}

private final class MetricsHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    private let registry: PrometheusCollectorRegistry
    private let prepare: @Sendable () -> Void
    private var request: HTTPRequestHead?

    init(registry: PrometheusCollectorRegistry, prepare: @escaping @Sendable () -> Void) {
        self.registry = registry
        self.prepare = prepare
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): request = head
        case .body: break
        case .end:
            guard let request else { return }
            self.request = nil
            guard request.method == .GET && request.uri.split(separator: "?").first == "/metrics" else {
                return respond(to: request, status: .notFound, body: Array("not found\n".utf8), context: context)
            }
            prepare()
            respond(to: request, status: .ok, body: registry.emitToBuffer(), context: context)
        }
    }

    private func respond(to request: HTTPRequestHead, status: HTTPResponseStatus, body bytes: [UInt8], context: ChannelHandlerContext) {
        var body = context.channel.allocator.buffer(capacity: bytes.count)
        body.writeBytes(bytes)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: status == .ok ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain")
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        let keepAlive = request.isKeepAlive
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        let head = HTTPResponseHead(version: request.version, status: status, headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            if !keepAlive { channel.close(promise: nil) }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) { context.close(promise: nil) }
}
