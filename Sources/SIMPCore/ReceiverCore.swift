import NIOCore

/// The receiving half of SIMP's reliability: receipts every content datagram and delivers each
/// message to the application once, however often it arrives.
public struct ReceiverCore: Sendable {
    /// What to do with one arriving content message.
    public struct Outcome: Equatable, Sendable {
        /// Hand the message to the application (first arrival only).
        public var deliver: Bool
        /// Send this RECEIPT over the control channel (always, so the sender stops retrying).
        public var receipt: SIMPMessage
        public var verdict: DedupeWindow.Verdict
    }

    public let windowSize: UInt64
    private var windows: [String: DedupeWindow] = [:]
    /// Arrivals not delivered because they were duplicates or too old.
    public private(set) var suppressed = 0

    public init(windowSize: UInt64 = 4096) { self.windowSize = windowSize }

    /// Judges `message`, which arrived at `arrivedAt`; `now` is when the receipt will be sent.
    public mutating func receive(_ message: SIMPMessage, arrivedAt: NIODeadline, now: NIODeadline) -> Outcome {
        let verdict = windows[message.fromUser, default: DedupeWindow(size: windowSize)].accept(message.messageId)
        if verdict != .deliver { suppressed += 1 }
        let held = max(0, min(Int64(UInt32.max), (now - arrivedAt).nanoseconds / 1000))
        return Outcome(deliver: verdict == .deliver, receipt: message.receipt(holdMicros: UInt32(held)), verdict: verdict)
    }
}
