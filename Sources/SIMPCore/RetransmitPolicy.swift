import NIOCore

/// How persistently a `ReliableSender` retransmits.
public struct RetransmitPolicy: Sendable, Equatable {
    /// RTO before any RTT sample (RFC 6298 recommends 1 s).
    public var initialRTO: TimeAmount = .seconds(1)
    /// Floor of the RTO. 150 ms rather than RFC 6298's 1 s: receipts carry the attempt they
    /// answer, so samples are unambiguous, and fast retransmit handles most losses anyway.
    public var minimumRTO: TimeAmount = .milliseconds(150)
    public var maximumRTO: TimeAmount = .seconds(10)

    /// A fresh RTT estimator with this policy's RTO bounds (the initial RTO until its first sample).
    public func makeEstimator() -> RTTEstimator {
        RTTEstimator(initialRTO: initialRTO, minimumRTO: minimumRTO, maximumRTO: maximumRTO)
    }
    /// Each retransmission multiplies the message's timeout by this factor.
    public var backoff: Double = 2
    /// Give-up is a time, not a count: a message with no receipt this long after it was
    /// submitted fails (`DeliveryFailure.expired`), whether it was in flight, waiting for room
    /// in the window, or the client was reconnecting. Until then it is retransmitted (every
    /// `maximumRTO` at most) and never fails for any other reason than a refusal.
    public var giveUpAfter: TimeAmount = .minutes(5)
    /// A message with no receipt this long after it was submitted is reported delayed, once
    /// (`SenderOutput.delayed`): the application can say the relay is slow or unreachable.
    public var delayNoticeAfter: TimeAmount = .seconds(5)
    /// An optional cap on transmissions (first send included), for tests and experiments:
    /// nil (the default) lets only `giveUpAfter` end retransmission.
    public var maxAttempts: Int?
    /// A message is sent only while its id is within this many ids of the oldest unreceipted
    /// one; later messages wait, in order. Keeps every in-flight id inside the receiver's
    /// dedupe window.
    public var maxIdSpan: UInt64 = 1024
    /// Fast retransmit: a message is sent again at once, without waiting for its timer, when
    /// this many messages to the same receiver, sent after its latest transmission, have been
    /// receipted first. 0 turns fast retransmit off.
    public var fastRetransmitThreshold: Int = 2
    /// Copies sent of each retransmission (not of first transmissions or of the resend after
    /// a reconnect): a message that was lost once is sent twice, so losing it again takes two
    /// losses. On KCP's test link this keeps the worst send → receipt time under 392 ms in 30
    /// of 30 seeds (1 copy: 23 of 30) for ~0.06 more datagrams per message (docs/SCENARIOS.md).
    public var retransmissionCopies: Int = 2

    public init() {}

    /// Whether a message that made `attempts` transmissions may make another.
    func mayRetransmit(after attempts: Int) -> Bool {
        maxAttempts.map { attempts < $0 } ?? true
    }
}

/// Why a message was given up.
public enum DeliveryFailure: Error, Equatable, Sendable {
    /// No receipt within `RetransmitPolicy.giveUpAfter` (`after`), in `attempts` transmissions
    /// (0: it never left the queue).
    case expired(after: TimeAmount, attempts: Int)
    /// No receipt after `attempts` transmissions (only with `RetransmitPolicy.maxAttempts`).
    case timedOut(attempts: Int)
    /// The relay refused the message.
    case rejected(SIMPMessage.ErrorCode, String)
    /// Refused before sending: sealed, it would take `size` bytes, over the relay's `limit`.
    case tooLarge(size: Int, limit: Int)
    /// Refused on this device before it was sent, for the reason given (say, a verified
    /// contact's key changed since and the user has not accepted the change).
    case notSent(String)
}

extension DeliveryFailure: CustomStringConvertible {
    public var description: String {
        switch self {
        case .expired(let after, let attempts):
            return "no receipt within \(Self.describe(after)) (\(attempts) transmissions)"
        case .timedOut(let attempts): return "no receipt after \(attempts) transmissions"
        case .rejected(_, let reason), .notSent(let reason): return reason
        case .tooLarge(let size, let limit):
            return "message too large: it would be a \(size)-byte datagram and the relay accepts at most \(limit) bytes "
                + "(shorten it by \(size - limit) bytes or more)"
        }
    }

    private static func describe(_ time: TimeAmount) -> String {
        let seconds = time.nanoseconds / 1_000_000_000
        return seconds >= 60 && seconds % 60 == 0 ? "\(seconds / 60) min" : "\(seconds) s"
    }
}

/// What became of one message.
public enum SenderEvent: Equatable, Sendable {
    /// The receipt came back `latency` after the first transmission, which took `attempts` sends.
    case delivered(messageId: UInt64, to: String, latency: TimeAmount, attempts: Int)
    case failed(messageId: UInt64, to: String, DeliveryFailure)
}

/// A message still without a receipt `waited` after it was submitted (reported once, after
/// `RetransmitPolicy.delayNoticeAfter`): it is still being sent; its outcome comes later.
public struct DelayedMessage: Equatable, Sendable {
    public var messageId: UInt64
    public var to: String
    public var waited: TimeAmount

    public init(messageId: UInt64, to: String, waited: TimeAmount) {
        self.messageId = messageId
        self.to = to
        self.waited = waited
    }
}

/// Work produced by the sender: datagrams to transmit now, and outcomes to report.
public struct SenderOutput: Equatable, Sendable {
    public var transmit: [SIMPMessage] = []
    public var events: [SenderEvent] = []
    /// Messages that crossed `RetransmitPolicy.delayNoticeAfter` without a receipt.
    public var delayed: [DelayedMessage] = []
    public init() {}
}
