import ServiceLifecycle

/// Runs a `RelayServer` under swift-service-lifecycle: starts it, then on graceful shutdown
/// (SIGTERM/SIGINT) removes its registrations and stops.
public struct RelayService: Service {
    public let server: RelayServer
    public init(server: RelayServer) { self.server = server }

    public func run() async throws {
        try await server.start()
        try? await gracefulShutdown()
        await server.shutdown()
    }
}
