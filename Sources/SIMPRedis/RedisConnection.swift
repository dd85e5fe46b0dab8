import NIOCore
import NIOPosix
import NIOSSL

/// Commands written together (one flush) and the promise for their replies, in order.
struct RedisRequest: Sendable {
    var commands: [[[UInt8]]]
    /// nil for commands whose answers arrive as pushes (SUBSCRIBE on a pub/sub connection).
    var promise: EventLoopPromise<[RedisValue]>?
}

/// A push on a subscribed connection: a message, or any other reply (subscription
/// confirmations such as `["ssubscribe", channel, count]`, errors).
enum RedisPush {
    case message(channel: String, payload: [UInt8])
    case reply(RedisValue)
}

/// Writes requests with hiredis's formatter and matches the replies hiredis's reader parses to
/// their promises, in order (pipelining: many requests may be in flight). With `onPush`, the
/// connection is a subscriber and every reply no request waits for goes there. A connection
/// that leaves a request unanswered for `timeout` (no reply at all meanwhile) is closed, which
/// fails everything in flight on it; one timer per connection does that, not one per request.
final class RedisChannelHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = RedisRequest
    typealias OutboundOut = ByteBuffer

    private let reader = RESPReader()
    private var waiting = CircularBuffer<(expected: Int, promise: EventLoopPromise<[RedisValue]>)>()
    /// Replies so far to the first waiting request (kept apart so appending never copies).
    private var replies: [RedisValue] = []
    private let onPush: ((RedisPush) -> Void)?
    private let name: String
    private let timeout: TimeAmount
    private var failure: Error?
    /// When the last reply came (or the first request was written to an idle connection).
    private var lastProgress = NIODeadline.now()
    private var watchdog: Scheduled<Void>?

    init(name: String, timeout: TimeAmount, onPush: ((RedisPush) -> Void)?) {
        self.name = name
        self.timeout = timeout
        self.onPush = onPush
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise written: EventLoopPromise<Void>?) {
        let request = unwrapOutboundIn(data)
        var buffer = context.channel.allocator.buffer(capacity: 64 * request.commands.count)
        for command in request.commands { RESPEncoder.write(command, into: &buffer) }
        if let promise = request.promise {
            if request.commands.isEmpty {
                promise.succeed([])
            } else {
                if waiting.isEmpty { lastProgress = .now() }
                waiting.append((request.commands.count, promise))
                watch(context: context, after: timeout)
            }
        }
        context.write(wrapOutboundOut(buffer), promise: written)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        do {
            try reader.feed(unwrapInboundIn(data))
            while let frame = try reader.next(pubSub: onPush != nil) {
                switch frame {
                case .message(let channel, let payload):
                    onPush?(.message(channel: channel, payload: payload))
                case .reply(let value):
                    try deliver(value)
                }
            }
        } catch {
            fail(context: context, error)
        }
    }

    /// Arms the watchdog (if not armed): when it fires, a request still waiting with no reply
    /// for `timeout` closes the connection.
    private func watch(context: ChannelHandlerContext, after delay: TimeAmount) {
        guard watchdog == nil else { return }
        watchdog = context.eventLoop.assumeIsolated().scheduleTask(in: delay) {
            self.watchdog = nil
            guard !self.waiting.isEmpty else { return }
            let quiet = NIODeadline.now() - self.lastProgress
            if quiet >= self.timeout {
                self.fail(context: context, RedisError("no reply within \(self.timeout.nanoseconds / 1_000_000) ms"))
            } else {
                self.watch(context: context, after: self.timeout - quiet)
            }
        }
    }

    private func deliver(_ value: RedisValue) throws {
        guard !waiting.isEmpty else {
            guard let onPush else { throw RedisError("Redis at \(name) sent a reply nobody asked for") }
            return onPush(.reply(value))
        }
        lastProgress = .now()
        if replies.isEmpty { replies.reserveCapacity(waiting[waiting.startIndex].expected) }
        replies.append(value)
        if replies.count == waiting[waiting.startIndex].expected {
            let done = waiting.removeFirst()
            let answer = replies
            replies = []
            done.promise.succeed(answer)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        fail(context: context, error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        watchdog?.cancel()
        watchdog = nil
        failWaiting(
            failure.map { RedisError("Redis at \(name): \($0)", unavailable: true) }
                ?? RedisError("connection to Redis at \(name) lost", unavailable: true))
        context.fireChannelInactive()
    }

    private func fail(context: ChannelHandlerContext, _ error: Error) {
        if failure == nil { failure = error }
        context.close(promise: nil)
    }

    private func failWaiting(_ error: Error) {
        replies = []
        while let next = waiting.popFirst() { next.promise.fail(error) }
    }
}

/// One connection to one Redis server, logged in (AUTH, SELECT) and ready, on one event loop.
struct RedisConnection: Sendable {
    let channel: Channel
    let url: RedisURL

    /// Connects (TLS when the URL says so), logs in and selects the URL's database.
    /// - Parameters:
    ///   - tlsContext: made once per client from `url.tls` (see `RedisTLS.makeContext`).
    ///   - onPush: makes this a subscriber connection; called on `eventLoop`.
    static func connect(
        to url: RedisURL, tlsContext: NIOSSLContext?, on eventLoop: EventLoop, timeout: TimeAmount,
        onPush: (@Sendable (RedisPush) -> Void)? = nil
    ) -> EventLoopFuture<RedisConnection> {
        let name = url.address
        let connected = ClientBootstrap(group: eventLoop)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tlsContext {
                        let hostname = url.host.isIPAddress ? nil : url.host
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tlsContext, serverHostname: hostname))
                    }
                    try channel.pipeline.syncOperations.addHandler(RedisChannelHandler(name: name, timeout: timeout, onPush: onPush))
                }
            }
            .connect(host: url.host, port: url.port)
        return connected.flatMap { channel in
            let connection = RedisConnection(channel: channel, url: url)
            let login = Self.loginCommands(for: url)
            guard !login.isEmpty else { return eventLoop.makeSucceededFuture(connection) }
            return connection.send(login.map { $0.map { Array($0.utf8) } }).flatMapThrowing { replies in
                for (command, reply) in zip(login, replies) {
                    if case .error(let message) = reply {
                        throw RedisError("Redis at \(url) refused \(command[0]): \(message)")
                    }
                }
                return connection
            }.flatMapErrorWithEventLoop { error, loop in
                channel.close(promise: nil)
                return loop.makeFailedFuture(error)
            }
        }
    }

    /// AUTH (user or requirepass) and SELECT, as the URL asks.
    private static func loginCommands(for url: RedisURL) -> [[String]] {
        var login: [[String]] = []
        if let password = url.password { login.append(["AUTH"] + (url.user.map { [$0] } ?? []) + [password]) }
        if url.database != 0 { login.append(["SELECT", String(url.database)]) }
        return login
    }

    /// Writes commands in one flush and returns their replies in order (a connection that does
    /// not answer within the connect `timeout` is closed, failing everything in flight on it).
    func send(_ commands: [[[UInt8]]]) -> EventLoopFuture<[RedisValue]> {
        let promise = channel.eventLoop.makePromise(of: [RedisValue].self)
        channel.writeAndFlush(RedisRequest(commands: commands, promise: promise)).whenFailure { error in
            promise.fail(RedisError("Redis at \(url.address): cannot send: \(error)", unavailable: true))
        }
        return promise.futureResult
    }

    /// Writes commands whose answers come as pushes (SUBSCRIBE, SSUBSCRIBE).
    func sendForPushes(_ commands: [[String]]) {
        channel.writeAndFlush(RedisRequest(commands: commands.map { $0.map { Array($0.utf8) } }, promise: nil), promise: nil)
    }

    func close() { channel.close(promise: nil) }
}

extension RedisTLS {
    /// The swift-nio-ssl context for these settings; throws a readable error for unreadable files.
    public func makeContext() throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let caFile { configuration.trustRoots = .file(caFile) }
        if let certificateFile, let keyFile {
            do {
                configuration.certificateChain = try NIOSSLCertificate.fromPEMFile(certificateFile).map { .certificate($0) }
                configuration.privateKey = .privateKey(try NIOSSLPrivateKey(file: keyFile, format: .pem))
            } catch {
                throw RedisError("cannot read the Redis TLS client certificate \(certificateFile) or key \(keyFile): \(error)")
            }
        }
        do { return try NIOSSLContext(configuration: configuration) } catch {
            throw RedisError("cannot set up TLS for Redis (ca=\(caFile ?? "system")): \(error)")
        }
    }
}

extension String {
    /// An IPv4 or IPv6 literal (TLS then checks the certificate's IP names, without SNI).
    var isIPAddress: Bool { (try? SocketAddress(ipAddress: self, port: 0)) != nil }
}
