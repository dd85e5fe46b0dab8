import NIOCore
import SIMPClient
import SIMPCore

/// Where one message the user sent stands.
public enum DeliveryStatus: Equatable, Sendable {
    /// Handed to the client, not yet transmitted.
    case pending
    /// Transmitted; waiting for the receiver's receipt.
    case sent
    /// The receiver is offline: the relay stored the message for it ("sent", not delivered).
    case stored
    /// The receiver has several devices and one of them is online: the relay took the message
    /// and is delivering it to each ("sent", not delivered; never "offline").
    case sentToDevices
    /// The receipt arrived.
    case delivered(latencyMillis: Double)
    /// The receiver has seen it (its read marker arrived).
    case read
    /// A room post the relay took while no one else was in the room (nothing to deliver).
    case noOtherMembers
    /// A room post: `delivered` of the room's `of` members have it.
    case roomDelivered(Int, of: Int)
    /// Given up; the reason is for the user.
    case failed(String)
    /// A file on its way: how far it is, shown as the mark (`3.1 MB of 10.0 MB, …`).
    case transferring(String)

    /// The mark shown after the message: … ✓ ✓✓ ✗.
    public var mark: String {
        switch self {
        case .pending: return "…"
        case .sent: return "✓"
        case .stored: return "✓ (stored)"
        case .sentToDevices: return "✓ (to devices)"
        case .noOtherMembers: return "✓ (no other members)"
        case .delivered: return "✓✓"
        case .read: return "✓✓ read"
        case .roomDelivered(let delivered, let total): return (delivered == total ? "✓✓ " : "✓ ") + "\(delivered)/\(total)"
        case .failed: return "✗"
        case .transferring(let progress): return progress
        }
    }

    /// Whether the outcome is known.
    public var isFinal: Bool {
        switch self {
        case .delivered, .failed, .stored, .sentToDevices, .noOtherMembers, .read, .roomDelivered: return true
        case .pending, .sent, .transferring: return false
        }
    }

    /// The word stored in the history file.
    public var historyName: String {
        switch self {
        case .pending: return "pending"
        case .sent: return "sent"
        case .stored: return "stored"
        case .sentToDevices: return "sent to devices"
        case .noOtherMembers: return "no other members"
        case .delivered: return "delivered"
        case .read: return "read"
        case .roomDelivered(let delivered, let total): return "delivered \(delivered)/\(total)"
        case .failed: return "failed"
        case .transferring: return Self.sendingFileName
        }
    }

    /// The history's status of a file being sent: left so when the chat stopped before the end.
    static let sendingFileName = "sending"

    /// The status a client's `SendResult` means.
    public init(_ result: SendResult) {
        switch result {
        case .delivered(_, let latency, _):
            self = .delivered(latencyMillis: Double(latency.nanoseconds) / 1_000_000)
        case .failed(_, let failure):
            self = .failed(failure.description)
        case .connectionLost:
            self = .failed("connection to the relay was lost")
        case .stored(_, let receiverOnline):
            self = receiverOnline ? .sentToDevices : .stored
        }
    }

    /// The relay took the message (stored, or being delivered to several devices): settled for
    /// the sender, delivered later.
    public var isInRelayCustody: Bool { self == .stored || self == .sentToDevices }
}

/// One message the user sent, and what is on screen for it.
public struct OutgoingMessage: Sendable {
    /// This session's number for the message (its id is known only once submitted).
    public let ref: Int
    public let message: SIMPMessage
    public var messageId: UInt64?
    public var status: DeliveryStatus = .pending
    /// Where its line was printed, and what it says, for rewriting the mark in place.
    public var row: Screen.Row?
    public var line: StyledText?
    /// Whether `/retry` already resent it.
    public var retried = false
    /// The file it stands for (`/file`, `/image`), sent by the controller, not as a message.
    public var file: ChatFile?
    /// A file's history entry (`ChatSession.recordFileSent`; a message's is its `messageId`).
    public var historyId: UInt64?
}

/// The messages sent in this session, by `ref`, in the order they were sent.
public struct OutgoingTracker: Sendable {
    public private(set) var messages: [OutgoingMessage] = []

    public init() {}

    /// Starts tracking `message` as pending; returns its ref.
    public mutating func add(_ message: SIMPMessage) -> Int {
        let ref = messages.count
        messages.append(OutgoingMessage(ref: ref, message: message))
        return ref
    }

    public subscript(ref: Int) -> OutgoingMessage {
        get { messages[ref] }
        set { messages[ref] = newValue }
    }

    /// Records that the client took the message as `messageId`, and transmitted it unless
    /// `transmitted` is false (no relay: it stays pending until `markResumed`). Returns false
    /// if the outcome was already known (it stays as it is).
    public mutating func markSubmitted(ref: Int, messageId: UInt64, transmitted: Bool) -> Bool {
        messages[ref].messageId = messageId
        guard !messages[ref].status.isFinal else { return false }
        if transmitted { messages[ref].status = .sent }
        return true
    }

    /// The relay is back and the client resent what was waiting: pending messages that have
    /// an id are sent now. Returns their refs.
    public mutating func markResumed() -> [Int] {
        let resumed = messages.indices.filter { messages[$0].status == .pending && messages[$0].messageId != nil }
        for index in resumed { messages[index].status = .sent }
        return resumed
    }

    /// A line was put above `row`: the lines from there on moved down one.
    public mutating func shiftRows(from row: Screen.Row) {
        for index in messages.indices where (messages[index].row ?? .min) >= row { messages[index].row! += 1 }
    }

    /// Records the outcome.
    public mutating func resolve(ref: Int, _ status: DeliveryStatus) {
        messages[ref].status = status
    }

    /// Messages whose outcome is not known yet.
    public var unresolvedCount: Int { messages.filter { !$0.status.isFinal }.count }

    /// Whether any message failed and was not resent.
    public var hasUnretriedFailures: Bool { messages.contains { isRetryable($0) } }

    /// The failed messages not resent yet, marked as resent.
    public mutating func takeFailures() -> [OutgoingMessage] {
        var taken: [OutgoingMessage] = []
        for index in messages.indices where isRetryable(messages[index]) {
            messages[index].retried = true
            taken.append(messages[index])
        }
        return taken
    }

    private func isRetryable(_ outgoing: OutgoingMessage) -> Bool {
        if case .failed = outgoing.status { return !outgoing.retried }
        return false
    }
}
