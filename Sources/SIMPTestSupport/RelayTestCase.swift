import XCTest

/// A test case with a fresh relay (and Redis) per test, stopped afterwards.
open class RelayTestCase: XCTestCase {
    public var relay: TestRelay!

    open override func setUp() async throws {
        relay = try await TestRelay.start()
    }

    open override func tearDown() async throws {
        await relay.stop()
    }
}
