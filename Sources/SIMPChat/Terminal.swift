import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's terminal: whether stdin/stdout are terminals, raw mode, window size.
public enum Terminal {
    /// The settings before `enableRawMode`, restored by `restore()` (also at exit).
    nonisolated(unsafe) private static var saved: termios?

    /// Whether `descriptor` is a terminal.
    public static func isTerminal(_ descriptor: Int32) -> Bool { isatty(descriptor) == 1 }

    /// Puts stdin in raw mode: no echo, no line buffering, no signals from Ctrl-C/Ctrl-Z, no
    /// CR→NL translation, so every key reaches the program as typed. Output processing stays
    /// on. The old settings come back with `restore()`, and at exit.
    public static func enableRawMode() throws {
        var settings = termios()
        guard tcgetattr(STDIN_FILENO, &settings) == 0 else { throw TerminalError("cannot read terminal settings") }
        if saved == nil {
            saved = settings
            atexit { Terminal.restore() }
        }
        settings.c_lflag &= ~tcflag_t(ECHO | ICANON | ISIG | IEXTEN)
        settings.c_iflag &= ~tcflag_t(IXON | ICRNL | INLCR | BRKINT | ISTRIP)
        withUnsafeMutableBytes(of: &settings.c_cc) { bytes in
            bytes[Int(VMIN)] = 1
            bytes[Int(VTIME)] = 0
        }
        guard tcsetattr(STDIN_FILENO, TCSADRAIN, &settings) == 0 else { throw TerminalError("cannot switch the terminal to raw mode") }
    }

    /// Restores the settings `enableRawMode` changed. Safe to call more than once.
    public static func restore() {
        guard var settings = saved else { return }
        tcsetattr(STDIN_FILENO, TCSADRAIN, &settings)
    }

    /// The window size of the terminal on stdout (columns, rows), or nil if unknown.
    public static func windowSize() -> (width: Int, height: Int)? {
        var size = winsize()
        let result = withUnsafeMutablePointer(to: &size) { ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), $0) }
        guard result == 0, size.ws_col > 0, size.ws_row > 0 else { return nil }
        return (Int(size.ws_col), Int(size.ws_row))
    }

    /// Writes all of `text` to stdout.
    public static func write(_ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(STDOUT_FILENO, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                return
            }
            bytes = bytes.dropFirst(written)
        }
    }
}

/// The terminal could not be set up.
public struct TerminalError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
