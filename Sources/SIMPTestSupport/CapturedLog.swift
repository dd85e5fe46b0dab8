import Logging
import NIOConcurrencyHelpers

/// A `Logger` whose lines are kept for assertions (level and message with metadata).
public final class CapturedLog: Sendable {
    private let lines = NIOLockedValueBox<[(level: Logger.Level, text: String)]>([])

    /// An empty log.
    public init() {}

    /// A logger writing here, at `level` and above.
    public func logger(level: Logger.Level = .debug) -> Logger {
        var logger = Logger(label: "captured") { _ in Handler(log: self) }
        logger.logLevel = level
        return logger
    }

    /// Lines at `level` or above, as "message key=value …".
    public func texts(atLeast level: Logger.Level = .trace) -> [String] {
        lines.withLockedValue { $0.filter { $0.level >= level }.map(\.text) }
    }

    fileprivate func append(_ level: Logger.Level, _ text: String) {
        lines.withLockedValue { $0.append((level, text)) }
    }

    private struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let all = metadata.merging(event.metadata ?? [:]) { $1 }
            let fields = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            log.append(event.level, ([event.message.description] + fields).joined(separator: " "))
        }
    }
}
