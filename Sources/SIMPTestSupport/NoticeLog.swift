import NIOCore
import SIMPClient
import SIMPCore

/// Collects a client's `DeliveryNotice`s (stored, delivered later, discarded) for assertions.
public actor NoticeLog {
    /// The notices so far, in the order they came.
    public private(set) var notices: [DeliveryNotice] = []

    /// Starts consuming `client.notices` (a stream has one consumer: use one log per client).
    public init(_ client: SIMPClient) {
        Task { [weak self] in
            for await notice in client.notices { await self?.append(notice) }
        }
    }

    private func append(_ notice: DeliveryNotice) { notices.append(notice) }

    /// Waits until a notice matching `predicate` arrived; returns whether it did within `timeout`.
    public func waitFor(within timeout: TimeAmount = Eventually.generousBound, _ predicate: @Sendable @escaping (DeliveryNotice) -> Bool) async
        -> Bool
    {
        await Eventually.holds(within: timeout) { self.notices.contains(where: predicate) }
    }
}
