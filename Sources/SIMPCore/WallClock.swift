import Foundation

/// Reading the wall clock, for shells only: the core itself takes time as a parameter.
public enum WallClock {
    /// Milliseconds since the Unix epoch, as carried in `SIMPMessage.time`.
    public static func millisecondsSinceEpoch() -> Int64 {
        Int64(Date().timeIntervalSince1970 * 1000)
    }

    /// Microseconds since the Unix epoch: the first message id of a new client, so ids keep
    /// increasing across restarts.
    public static func microsecondsSinceEpoch() -> UInt64 {
        UInt64(Date().timeIntervalSince1970 * 1_000_000)
    }
}
