import NIOCore
import XCTest

/// Waits until a line on `terminal`'s screen contains `text`; if none does within `timeout`,
/// fails the calling test at the caller's line, printing the whole screen.
public func assertScreen(
    _ terminal: PseudoTerminalProcess, shows text: String, within timeout: TimeAmount = Eventually.generousBound,
    file: StaticString = #filePath, line: UInt = #line
) async {
    let shown = await terminal.waitForScreen(within: timeout) { $0.transcript.contains { $0.contains(text) } }
    XCTAssertTrue(shown, "screen lacks \(text):\n" + terminal.screen.transcript.joined(separator: "\n"), file: file, line: line)
}
