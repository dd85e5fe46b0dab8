import Logging
import NIOCore

/// What `--redis` names: one server, or a Redis Cluster given by some of its nodes.
///
/// - `redis://…` / `rediss://…`: one server (`RedisURL`).
/// - `redis+cluster://[USER:PASSWORD@]HOST:PORT[,HOST:PORT…][?ca=…]` (or `rediss+cluster://` for
///   TLS): a cluster; the hosts are seeds, the login and TLS options apply to every node, and the
///   database must be 0 (clusters have one).
public enum RedisEndpoint: Sendable, Equatable, CustomStringConvertible {
    case single(RedisURL)
    case cluster(seeds: [RedisURL])

    /// Parses a Redis or Redis Cluster URL; errors never contain the password.
    public init(parsing text: String) throws {
        for (clusterScheme, plainScheme) in [("redis+cluster://", "redis://"), ("rediss+cluster://", "rediss://")]
        where text.hasPrefix(clusterScheme) {
            let rest = text.dropFirst(clusterScheme.count)
            let query = rest.firstIndex(of: "?").map { String(rest[$0...]) } ?? ""
            let authority = rest.prefix { $0 != "?" }
            let login = authority.lastIndex(of: "@").map { String(authority[...$0]) } ?? ""
            let hosts = authority.dropFirst(login.count).split(separator: ",")
            guard !hosts.isEmpty else { throw RedisError("Redis Cluster URL \"\(RedisURL.redacted(text))\" names no node") }
            let seeds = try hosts.map { try RedisURL(parsing: plainScheme + login + $0 + query) }
            guard seeds.allSatisfy({ $0.database == 0 }) else {
                throw RedisError("Redis Cluster has only database 0: \"\(RedisURL.redacted(text))\"")
            }
            self = .cluster(seeds: seeds)
            return
        }
        self = .single(try RedisURL(parsing: text))
    }

    /// The URL(s), passwords shown as `***`.
    public var description: String {
        switch self {
        case .single(let url): return url.description
        case .cluster(let seeds): return "cluster " + seeds.map(\.description).joined(separator: ",")
        }
    }

    /// The endpoint as text *with* its password, to hand to a child process (`--redis`). Never log it.
    public var textWithPassword: String {
        switch self {
        case .single(let url):
            return url.textWithPassword
        case .cluster(let seeds):
            // The first seed carries login and options (database 0: no path); the others add their addresses.
            let first = seeds[0].textWithPassword
            let query = first.firstIndex(of: "?").map { String(first[$0...]) } ?? ""
            let base = String(first.dropLast(query.count)).replacingFirst("://", with: "+cluster://")
            return base + seeds.dropFirst().map { "," + $0.address }.joined() + query
        }
    }

    /// A client for this endpoint whose connections live on `eventLoop`.
    public func makeClient(eventLoop: EventLoop, logger: Logger) -> any RedisCommands {
        switch self {
        case .single(let url): return RedisClient(url: url, logger: logger, eventLoop: eventLoop)
        case .cluster(let seeds): return RedisClusterClient(seeds: seeds, logger: logger, eventLoop: eventLoop)
        }
    }
}

/// A pub/sub subscription: `RedisSubscriber` (one server) or `RedisClusterSubscriber`.
public protocol RedisSubscription: AnyObject, Sendable {
    /// Connects and subscribes in the background.
    func start()
    /// Waits until every channel is subscribed.
    func waitUntilSubscribed(timeout: TimeAmount) async throws
    /// Closes the subscription.
    func stop() async
}

extension RedisSubscriber: RedisSubscription {}
extension RedisClusterSubscriber: RedisSubscription {}

extension RedisEndpoint {
    /// A subscription to classic `channels` and sharded `shardChannels`; callbacks run on `eventLoop`.
    /// On a cluster, `client` places the sharded channels (a `RedisClusterClient` made by
    /// `makeClient`; any other client makes the subscriber use a cluster client of its own).
    public func makeSubscriber(
        client: any RedisCommands, channels: [String], shardChannels: [String],
        eventLoop: EventLoop, logger: Logger, onSubscribed: @escaping @Sendable () -> Void,
        onMessage: @escaping RedisSubscriber.Handler
    ) -> any RedisSubscription {
        switch self {
        case .single(let url):
            return RedisSubscriber(
                url: url, channels: channels, shardChannels: shardChannels, eventLoop: eventLoop,
                logger: logger, onSubscribed: onSubscribed, onMessage: onMessage)
        case .cluster(let seeds):
            let cluster = client as? RedisClusterClient ?? RedisClusterClient(seeds: seeds, logger: logger, eventLoop: eventLoop)
            return RedisClusterSubscriber(
                cluster: cluster, channels: channels, shardChannels: shardChannels, eventLoop: eventLoop,
                logger: logger, onSubscribed: onSubscribed, onMessage: onMessage)
        }
    }
}
