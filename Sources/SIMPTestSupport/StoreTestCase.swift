import Logging
import NIOCore
import NIOPosix
import SIMPRelay
import XCTest

/// A test of the relay's stores: each story runs on a private Redis (`RedisRelayStore`) and on
/// the in-memory store, which must give the same answers. The stores are shut down, and the
/// Redis stopped, after each test.
open class StoreTestCase: XCTestCase {
    /// An event loop for the stores' futures.
    public let loop = MultiThreadedEventLoopGroup.singleton.next()
    private var redis: RedisServerProcess?
    private var stores: [any RelayStore] = []

    /// Shuts the test's stores down and stops its Redis.
    open override func tearDown() async throws {
        for store in stores { await store.shutdown() }
        stores = []
        await redis?.stop()
        try await super.tearDown()
    }

    /// A store on a private Redis, with the default limits changed by `configure`.
    public func redisStore(_ configure: (inout RedisRelayStore.Limits) -> Void = { _ in }) async throws -> RedisRelayStore {
        var limits = RedisRelayStore.Limits()
        configure(&limits)
        let redis = try await RedisServerProcess.start()
        self.redis = redis
        let store = RedisRelayStore(url: redis.url, limits: limits, logger: Logger(label: "test"))
        stores.append(store)
        return store
    }

    /// Shuts `store` (made by the test itself) down after the test.
    public func keep(_ store: any RelayStore) {
        stores.append(store)
    }

    /// A Redis store (`redisStore`) and an in-memory store with the same limits.
    public func bothStores(_ configure: (inout RedisRelayStore.Limits) -> Void = { _ in }) async throws -> [any RelayStore] {
        var limits = RedisRelayStore.Limits()
        configure(&limits)
        let memory = InMemoryRelayStore(limits: limits)
        stores.append(memory)
        return [try await redisStore(configure), memory]
    }
}
