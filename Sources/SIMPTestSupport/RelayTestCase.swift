import SIMPRelay
import XCTest

/// A test case with a fresh relay (and Redis) per test, stopped afterwards.
open class RelayTestCase: XCTestCase {
    /// This test's relay, started in `setUp`.
    public var relay: TestRelay!

    /// Adjusts the relay's settings before each test's relay starts.
    open func configureRelay(_ configuration: inout RelayConfiguration) {}

    /// The store of each test's relay (nil, the default: Redis's).
    open func makeRelayStore(_ configuration: RelayConfiguration) -> (any RelayStore)? { nil }

    /// Starts the test's relay (with `configureRelay`'s settings) and its Redis.
    open override func setUp() async throws {
        relay = try await TestRelay.start(configure: { self.configureRelay(&$0) }, makeStore: { self.makeRelayStore($0) })
    }

    /// Stops the test's relay (and its Redis, unless the Redis is a shared one).
    open override func tearDown() async throws {
        await relay.stop()
    }
}
