import ServiceLifecycle
import SIMPCore
import Synchronization

/// `simp listen`: prints every message a client receives until `count` messages arrived or a
/// graceful shutdown (SIGINT/SIGTERM) is requested; then disconnects.
///
/// A message is printed as it is handed to the application, on the client's event loop and
/// before its receipt is written (a receipt means the application has it, docs/PROTOCOL.md
/// §6.1): install `printer` as the client's `ClientConfiguration.messageHandler`.
public struct ListenService: Service {
    /// Prints each message handed to it, at most `limit` of them.
    public final class Printer: Sendable {
        private let limit: Int?
        private let format: @Sendable (SIMPMessage) -> String
        private let printLine: @Sendable (String) -> Void
        private let printed = Mutex(0)

        public init(limit: Int?, format: @escaping @Sendable (SIMPMessage) -> String, printLine: @escaping @Sendable (String) -> Void) {
            self.limit = limit
            self.format = format
            self.printLine = printLine
        }

        /// Prints `message` unless `limit` messages were printed already.
        public func print(_ message: SIMPMessage) {
            let admitted = printed.withLock { count -> Bool in
                if let limit, count >= limit { return false }
                count += 1
                return true
            }
            if admitted { printLine(format(message)) }
        }
    }

    public let client: SIMPClient
    /// Stop after this many messages; nil means run until stopped.
    public let count: Int?

    public init(client: SIMPClient, count: Int?) {
        self.client = client
        self.count = count
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            var received = 0
            for await _ in client.messages { // printed by the client's message handler
                received += 1
                if let count, received >= count { break }
            }
        }
        await client.close()
    }
}
