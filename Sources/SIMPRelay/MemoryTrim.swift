#if canImport(Glibc)
import Glibc
#endif

/// Gives the C allocator's free memory back to the system after many control connections
/// closed. glibc's malloc keeps what a connection freed in its heaps (the channel, its pipeline
/// and buffers), and a heap shrinks only from its top, so after a flood of connections (2,000
/// that never logged in, closed at the login deadline) the relay's RSS stayed about 8 MB above
/// its baseline (`simp-bench abuse`); `malloc_trim` releases the free pages in the middle of
/// the heaps too.
struct MemoryTrim {
    /// Connections closed since the last trim that call for the next one.
    static let afterClosedConnections = 500
    /// How long after the threshold the trim runs, so a burst of closures is over first.
    static let delaySeconds: Int64 = 2

    private var closedSinceTrim = 0
    private var scheduled = false

    /// A control connection closed: true when a trim is to be scheduled now (once per burst).
    mutating func connectionClosed() -> Bool {
        closedSinceTrim += 1
        guard closedSinceTrim >= Self.afterClosedConnections, !scheduled else { return false }
        scheduled = true
        return true
    }

    /// Returns the free memory of the process's heaps to the system.
    mutating func trim() {
        closedSinceTrim = 0
        scheduled = false
        #if canImport(Glibc)
        // Not in Swift's Glibc module: looked up in the process (glibc has it; musl does not).
        typealias Trim = @convention(c) (Int) -> Int32
        if let symbol = dlsym(nil, "malloc_trim") { _ = unsafeBitCast(symbol, to: Trim.self)(0) }
        #endif
    }
}
