import SIMPCore
import ServiceLifecycle
import Synchronization

/// `simp listen`: prints every message a client receives until `count` messages arrived or a
/// graceful shutdown (SIGINT/SIGTERM) is requested; then disconnects.
///
/// A message is printed as it is handed to the application, on the client's event loop and
/// before its receipt is written (a receipt means the application has it, docs/PROTOCOL.md
/// §6.1): install `printer.print` as the client's `ClientConfiguration.messageHandler`.
public struct ListenService: Service {
    /// Prints each message handed to it once, at most `limit` of them. With a `record`, the
    /// message's key is added right after its line is written (before the receipt), and a
    /// message already in the record (printed by an earlier run of this user and device whose
    /// receipt a crash cut off) is skipped: only a crash between writing a line and adding its
    /// key prints that one line again (docs/PROTOCOL.md §6.4).
    public final class Printer: Sendable {
        private let limit: Int?
        private let record: DeliveredRecord?
        private let format: @Sendable (SIMPMessage) -> String
        private let printLine: @Sendable (String) -> Void
        private let warn: @Sendable (String) -> Void
        /// Lines printed, and whether adding to the record failed (said once).
        private let progress = Mutex((printed: 0, recordFailed: false))
        /// Whether messages that did not come end to end encrypted are printed.
        private let allowPlaintext: Bool
        /// How many such messages were refused (not printed, receipted).
        private let refused = Mutex(0)
        /// Prints a message with where it came from (`print(_:origin:)`).
        private let formatWithOrigin: (@Sendable (SIMPMessage, MessageOrigin) -> String)?

        /// `warn` hears, once, that the record could not be written (the listener goes on).
        public init(
            limit: Int?, record: DeliveredRecord? = nil, format: @escaping @Sendable (SIMPMessage) -> String,
            printLine: @escaping @Sendable (String) -> Void, warn: @escaping @Sendable (String) -> Void = { _ in }
        ) {
            self.limit = limit
            self.record = record
            self.format = format
            self.printLine = printLine
            self.warn = warn
            self.allowPlaintext = true
            self.formatWithOrigin = nil
        }

        /// A printer of messages with where they came from (`print(_:origin:)`): one that did
        /// not come end to end encrypted is refused unless `allowPlaintext` (not printed,
        /// counted, receipted so that the relay does not deliver it again; `warn` hears of the
        /// first, and of the count at `refusedCount`).
        public init(
            limit: Int?, record: DeliveredRecord? = nil, allowPlaintext: Bool, format: @escaping @Sendable (SIMPMessage, MessageOrigin) -> String,
            printLine: @escaping @Sendable (String) -> Void, warn: @escaping @Sendable (String) -> Void = { _ in }
        ) {
            self.limit = limit
            self.record = record
            self.format = { format($0, MessageOrigin(endToEnd: $0.isEndToEnd)) }
            self.printLine = printLine
            self.warn = warn
            self.allowPlaintext = allowPlaintext
            self.formatWithOrigin = format
        }

        /// How many messages were refused for not coming end to end encrypted.
        public var refusedCount: Int { refused.withLock { $0 } }

        /// Prints `message` as `print(_:)` does, marked with `origin`; one that did not come
        /// end to end encrypted is refused (returns false) unless plaintext is allowed.
        public func print(_ message: SIMPMessage, origin: MessageOrigin) -> Bool {
            if !origin.endToEnd, !allowPlaintext {
                let count = refused.withLock { count in
                    count += 1
                    return count
                }
                if count == 1 {
                    warn(
                        "refused a message from \(message.author.isEmpty ? message.fromUser : message.author) that did not come end-to-end encrypted "
                            + "(the relay, or a client without end-to-end encryption, wrote it); such messages are not shown "
                            + "(--allow-plaintext shows them, marked)")
                }
                return false
            }
            return print(message, formatted: { formatWithOrigin?($0, origin) ?? format($0) })
        }

        /// Prints `message` unless it is in the record or `limit` messages were printed
        /// already; returns whether it printed it.
        public func print(_ message: SIMPMessage) -> Bool { print(message, formatted: format) }

        private func print(_ message: SIMPMessage, formatted: (SIMPMessage) -> String) -> Bool {
            let key = DeliveredKey(message)
            if record?.contains(key) == true { return false }
            let admitted = progress.withLock { progress -> Bool in
                if let limit, progress.printed >= limit { return false }
                progress.printed += 1
                return true
            }
            guard admitted else { return false }
            printLine(formatted(message))
            do { try record?.add(key) } catch {
                let first = progress.withLock { progress in
                    defer { progress.recordFailed = true }
                    return !progress.recordFailed
                }
                if first { warn("\(error); a restart may print messages again whose receipt it cut off") }
            }
            return true
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
            for await _ in client.messages { // printed by the client's message handler (copies printed before are not here)
                received += 1
                if let count, received >= count { break }
            }
        }
        await client.close()
    }
}
