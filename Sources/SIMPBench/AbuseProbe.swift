import Foundation
import NIOCore
import SIMPClient
import SIMPCore

/// The third user during an attack: every `interval` a new user logs in (the reference client,
/// `SIMPClient`, plain) and sends one message to a receiver logged in before; its login times
/// and send latencies (from the send until the receiver's receipt came back).
public struct AbuseProbe: Sendable {
    public var port: Int
    public var interval: Duration = .milliseconds(200)

    public init(port: Int) { self.port = port }

    /// What the probe saw.
    public struct Figures: Codable, Equatable, Sendable {
        public var logins: [Double] = []
        public var sends: [Double] = []
        public var failures: [String] = []

        public var slowestLogin: Double { logins.max() ?? 0 }
        /// The 99th percentile of the send latencies (the slowest under 100 sends).
        public var sendP99: Double { Self.percentile(sends, 0.99) }
        public var sendMedian: Double { Self.percentile(sends, 0.5) }

        static func percentile(_ values: [Double], _ fraction: Double) -> Double {
            guard !values.isEmpty else { return 0 }
            let sorted = values.sorted()
            return sorted[min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1)]
        }
    }

    /// Probes for `duration`; `name` makes the users' names.
    public func run(for duration: Duration, name: String) async throws -> Figures {
        let receiver = try await connect("\(name)-dave")
        defer { Task { await receiver.close() } }
        var figures = Figures()
        let end = ContinuousClock.now + duration
        var index = 0
        while ContinuousClock.now < end {
            index += 1
            let started = ContinuousClock.now
            let sender: SIMPClient
            do {
                sender = try await connect("\(name)-carol\(index)")
            } catch {
                figures.failures.append("login \(index) after \(ContinuousClock.now - started): \(error)")
                continue
            }
            figures.logins.append(Self.seconds(ContinuousClock.now - started))
            let sent = ContinuousClock.now
            do {
                let result = try await sender.send(text: "probe \(index)", to: "\(name)-dave")
                if case .delivered = result {
                    figures.sends.append(Self.seconds(ContinuousClock.now - sent))
                } else {
                    figures.failures.append("send \(index): \(result)")
                }
            } catch {
                figures.failures.append("send \(index): \(error)")
            }
            await sender.close()
            try await Task.sleep(for: interval)
        }
        return figures
    }

    private func connect(_ user: String) async throws -> SIMPClient {
        var configuration = ClientConfiguration(serverHost: "127.0.0.1", serverPort: port, user: user)
        configuration.reconnect = nil
        let client = SIMPClient(configuration: configuration)
        try await client.connect()
        return client
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
