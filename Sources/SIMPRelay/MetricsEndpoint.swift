import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus

/// Serves a Prometheus registry as text at `GET /metrics` (anything else: 404).
/// `beforeScrape` runs on the channel's event loop before each export, to bring figures
/// that are sampled rather than counted up to date.
enum MetricsEndpoint {
    static func bind(
        host: String, port: Int, registry: PrometheusCollectorRegistry, on loop: EventLoop,
        beforeScrape: @escaping @Sendable () -> Void
    ) async throws -> Channel {
        try await ServerBootstrap(group: loop)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(
                        MetricsHTTPHandler(registry: registry, beforeScrape: beforeScrape))
                }
            }
            .bind(host: host, port: port).get()
    }
}

private final class MetricsHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    private let registry: PrometheusCollectorRegistry
    private let beforeScrape: @Sendable () -> Void
    private var request: HTTPRequestHead?

    init(registry: PrometheusCollectorRegistry, beforeScrape: @escaping @Sendable () -> Void) {
        self.registry = registry
        self.beforeScrape = beforeScrape
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): request = head
        case .body: break
        case .end:
            guard let request else { return }
            self.request = nil
            respond(to: request, context: context)
        }
    }

    private func respond(to request: HTTPRequestHead, context: ChannelHandlerContext) {
        let found = request.method == .GET && request.uri.split(separator: "?").first == "/metrics"
        var body = context.channel.allocator.buffer(capacity: found ? 4096 : 16)
        if found {
            beforeScrape()
            body.writeBytes(registry.emitToBuffer())
        } else {
            body.writeString("not found\n")
        }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: found ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain")
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        let keepAlive = request.isKeepAlive
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        let head = HTTPResponseHead(version: request.version, status: found ? .ok : .notFound, headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            if !keepAlive { channel.close(promise: nil) }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) { context.close(promise: nil) }
}
