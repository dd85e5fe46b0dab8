import Foundation
import NIOConcurrencyHelpers
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// A built executable of this package run on a pseudo-terminal, as a user at a terminal
/// would run it: the test types keys and reads the screen (`VirtualTerminal`).
public final class PseudoTerminalProcess: Sendable {
    /// The program running on the terminal.
    public let child: ChildProcess
    private let controller: Int32
    private let output = NIOLockedValueBox<[UInt8]>([])
    /// The terminal's width in columns, as the program was told.
    public let width: Int
    /// The terminal's height in rows.
    public let height: Int

    /// Opens a pseudo-terminal of `width`×`height` and starts `executable` on it.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:],
        width: Int = 100, height: Int = 30
    ) throws {
        self.width = width
        self.height = height
        // posix_openpt/unlockpt/ptsname are not visible to Swift's Glibc module; this is what
        // they do on Linux: open the multiplexer, unlock the new terminal, ask for its number.
        let controller = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        self.controller = controller
        var unlock: Int32 = 0
        var number: UInt32 = 0
        guard controller >= 0, ioctl(controller, Self.setLock, &unlock) == 0,
            ioctl(controller, Self.getNumber, &number) == 0
        else {
            throw ChildProcessError(description: "cannot open a pseudo-terminal: errno \(errno)")
        }
        let name = "/dev/pts/\(number)"
        var size = winsize(ws_row: UInt16(height), ws_col: UInt16(width), ws_xpixel: 0, ws_ypixel: 0)
        _ = withUnsafeMutablePointer(to: &size) { ioctl(controller, UInt(TIOCSWINSZ), $0) }
        let terminal = open(name, O_RDWR | O_NOCTTY)
        guard terminal >= 0 else { throw ChildProcessError(description: "cannot open \(name)") }
        defer { close(terminal) }
        child = try ChildProcess(
            executable, arguments, environment: environment,
            terminal: FileHandle(fileDescriptor: terminal, closeOnDealloc: false))
        let thread = Thread { [output] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(controller, &buffer, buffer.count)
                if count < 0, errno == EINTR { continue }
                if count <= 0 { break }
                output.withLockedValue { $0 += buffer[0..<count] }
            }
        }
        thread.start()
    }

    /// TIOCSPTLCK = _IOW('T', 0x31, int) and TIOCGPTN = _IOR('T', 0x30, unsigned int) from
    /// <asm-generic/ioctls.h> (function-like macros Swift does not import).
    private static let setLock: UInt = 0x4004_5431
    private static let getNumber: UInt = 0x8004_5430

    deinit {
        child.signal(SIGKILL)
        close(controller)
    }

    /// Everything the program wrote to the terminal, escape sequences included.
    public var rawOutput: String { String(decoding: output.withLockedValue { $0 }, as: UTF8.self) }

    /// The screen as the user sees it now.
    public var screen: VirtualTerminal {
        var terminal = VirtualTerminal(width: width, height: height)
        terminal.feed(rawOutput)
        return terminal
    }

    /// Types `text` (use "\r" for Enter, "\u{1B}[D" for ←, …).
    public func type(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(controller, $0.baseAddress, $0.count) }
    }

    /// Waits until the screen satisfies `condition`; returns whether it did within `timeout`.
    public func waitForScreen(
        within timeout: TimeAmount = .seconds(10),
        _ condition: @escaping (VirtualTerminal) -> Bool
    ) async -> Bool {
        await Eventually.holds(within: timeout) { condition(self.screen) }
    }
}
