import Logging

/// How `simp-server` writes its log to standard error (`--log-format`).
public enum LogFormat: String, CaseIterable, Sendable {
    /// One readable line per record (swift-log's `StreamLogHandler`).
    case text
    /// One JSON object per line (`JSONLogHandler`), for log shippers.
    case json

    /// A handler for the logger `label` that writes records at `level` and above.
    public func makeHandler(label: String, level: Logger.Level) -> any LogHandler {
        var handler: any LogHandler
        switch self {
        case .text: handler = StreamLogHandler.standardError(label: label)
        case .json: handler = JSONLogHandler.standardError(label: label)
        }
        handler.logLevel = level
        return handler
    }
}
