import NIOCore
import SIMPRelay

/// A test store around Redis's that watches or changes what `perform` answers and passes
/// everything else to the store it wraps (`inner`): conform and write `perform` alone.
public protocol WrappingRelayStore: RelayStore {
    /// The store every other request goes to.
    var inner: RedisRelayStore { get }
}

extension WrappingRelayStore {
    public func subscribe(
        relayId: String, on eventLoop: EventLoop, _ handler: @escaping @Sendable (RelayStoreEvent) -> Void
    ) -> EventLoopFuture<Void> {
        inner.subscribe(relayId: relayId, on: eventLoop, handler)
    }
    public var roundTrips: Int { inner.roundTrips }
    public func ping() async throws { try await inner.ping() }
    public func decoySecret() async throws -> [UInt8] { try await inner.decoySecret() }
    public func shutdown() async { await inner.shutdown() }
}
