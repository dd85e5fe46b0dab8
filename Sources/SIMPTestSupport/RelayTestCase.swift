import SIMPRelay
import XCTest

/// A test case with a fresh relay (and Redis) per test, stopped afterwards.
open class RelayTestCase: XCTestCase {
    public var relay: TestRelay!

    /// Adjusts the relay's settings before each test's relay starts.
    open func configureRelay(_ configuration: inout RelayConfiguration) {}

    open override func setUp() async throws {
        relay = try await TestRelay.start { self.configureRelay(&$0) }
    }

    open override func tearDown() async throws {
        await relay.stop()
    }
}
