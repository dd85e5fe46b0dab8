import NIOPosix
import SIMPCore
import SIMPRedis
import SIMPRelay

extension RedisCommands {
    /// The stored entries `user`'s `device` has not receipted, oldest first (read only).
    func pendingEntries(_ user: String, device: String = "") async throws -> [InboxEntry] {
        let store = InboxStore(redis: self, maxMessages: 1, ttlSeconds: 1)
        return try await store.pending(user: user, device: device, on: MultiThreadedEventLoopGroup.singleton.next()).get()
    }

    /// How many entries `user`'s log holds (for every device).
    func logLength(_ user: String) async throws -> Int64 {
        try await command(["XLEN", InboxStore.logKey(user)]).integer ?? -1
    }
}
