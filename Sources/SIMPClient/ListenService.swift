import ServiceLifecycle
import SIMPCore

/// Prints every message a connected client receives until `count` messages arrived or a
/// graceful shutdown (SIGINT/SIGTERM) is requested; then disconnects.
public struct ListenService: Service {
    public let client: SIMPClient
    /// Stop after this many messages; nil means run until stopped.
    public let count: Int?
    public let printLine: @Sendable (String) -> Void
    public let format: @Sendable (SIMPMessage) -> String

    public init(client: SIMPClient, count: Int?, format: @escaping @Sendable (SIMPMessage) -> String,
                printLine: @escaping @Sendable (String) -> Void) {
        self.client = client
        self.count = count
        self.format = format
        self.printLine = printLine
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            var received = 0
            for await message in client.messages {
                printLine(format(message))
                received += 1
                if let count, received >= count { break }
            }
        }
        await client.close()
    }
}
