import Foundation
import Logging
import NIOConcurrencyHelpers

/// Routes log messages into the chat, where they are printed as notices above the input line
/// instead of over what the user is typing. Until a chat attaches (and after it detaches)
/// they go to standard error.
public final class ChatLog: Sendable {
    private let sink = NIOLockedValueBox<(@Sendable (String) -> Void)?>(nil)

    public init() {}

    /// A log handler writing here, for `LoggingSystem.bootstrap`.
    public func handler(label: String, level: Logger.Level) -> LogHandler {
        ChatLogHandler(log: self, logLevel: level)
    }

    func attach(_ sink: @escaping @Sendable (String) -> Void) { self.sink.withLockedValue { $0 = sink } }

    func detach() { sink.withLockedValue { $0 = nil } }

    func emit(_ line: String) {
        if let sink = sink.withLockedValue({ $0 }) {
            sink(line)
        } else {
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }
    }
}

/// Formats a log event as one line, `warning: text (key=value)`, for `ChatLog`.
struct ChatLogHandler: LogHandler {
    let log: ChatLog
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let details = metadata.merging(event.metadata ?? [:]) { $1 }
            .sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        log.emit("\(event.level): \(event.message)" + (details.isEmpty ? "" : " (\(details))"))
    }
}
