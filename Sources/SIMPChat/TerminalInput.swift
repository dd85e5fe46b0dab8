import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// Reads stdin on its own thread and hands the result over: keys from a raw-mode terminal, or
/// lines from a pipe or file. Calls `onEnd` at end of input.
final class TerminalInput: Sendable {
    private let stopped = NIOLockedValueBox(false)

    /// How long a lone ESC waits for the rest of a sequence before it counts as Escape.
    static let escapeTimeoutMillis: Int32 = 50

    /// Starts reading keys (raw mode must be on).
    func startKeys(_ onKeys: @escaping @Sendable ([Key]) -> Void, onEnd: @escaping @Sendable () -> Void) {
        startThread { [stopped] in
            var decoder = KeyDecoder()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !stopped.withLockedValue({ $0 }) {
                var descriptor = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
                let timeout = decoder.hasPending ? Self.escapeTimeoutMillis : 200
                let ready = poll(&descriptor, 1, timeout)
                if ready == 0 {
                    if decoder.hasPending { onKeys(decoder.flush()) }
                    continue
                }
                if ready < 0 { if errno == EINTR { continue } else { break } }
                let count = read(STDIN_FILENO, &buffer, buffer.count)
                if count < 0, errno == EINTR || errno == EAGAIN { continue }
                if count <= 0 { break }
                let keys = decoder.feed(buffer[0..<count])
                if !keys.isEmpty { onKeys(keys) }
            }
            onEnd()
        }
    }

    /// Starts reading lines (stdin is not a terminal).
    func startLines(_ onLine: @escaping @Sendable (String) -> Void, onEnd: @escaping @Sendable () -> Void) {
        startThread { [stopped] in
            while !stopped.withLockedValue({ $0 }), let line = readLine(strippingNewline: true) {
                onLine(line)
            }
            onEnd()
        }
    }

    /// Stops reading (at the next key or line, or within 200 ms in key mode).
    func stop() { stopped.withLockedValue { $0 = true } }

    private func startThread(_ body: @escaping @Sendable () -> Void) {
        let thread = Thread(block: body)
        thread.name = "simp-chat-input"
        thread.start()
    }
}
