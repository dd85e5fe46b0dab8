import NIOCore

/// The reply to a request on the control connection (ROOM_JOIN, ROOM_LEAVE, ROOM_MEMBERS, WHO,
/// KEYS_*): the member or presence lines the relay answered with, or why there is none.
public struct RequestReply: Equatable, Sendable {
    /// Why a request has no answer.
    public enum Failure: Error, Equatable, Sendable {
        /// The relay answered with an ERROR carrying the request's id.
        case refused(code: SIMPMessage.ErrorCode, text: String)
        /// The control connection was lost before the answer came.
        case connectionLost
        /// No answer came before the request's deadline (`ClientSession.requestTimeout`).
        case timedOut
    }

    /// The id `ClientSession.request` gave the request frame.
    public var requestId: UInt64
    public var result: Result<[String], Failure>

    public init(requestId: UInt64, result: Result<[String], Failure>) {
        self.requestId = requestId
        self.result = result
    }
}

/// A request sent and not answered yet: sent again when the relay said it was over its budget
/// (ERROR RATE_LIMITED) and when to try again, while that is before its deadline.
struct PendingRequest: Equatable, Sendable {
    var frame: SIMPMessage
    var deadline: NIODeadline
    /// When to send it again (after a RATE_LIMITED); nil while it waits for its answer.
    var retryAt: NIODeadline?
}

/// Requests and their replies (docs/PROTOCOL.md §7): the session numbers each request and
/// recognises its reply, so no shell matches frames to requests itself.
extension ClientSession {
    /// How long a request waits for its answer, its retries after RATE_LIMITED included.
    public static let requestTimeout: TimeAmount = .seconds(10)

    /// A request frame of `kind` for the control connection, with a fresh id (`fill` sets its
    /// other fields); its reply comes in `Output.replies` of the `controlReceived` that brings
    /// it, of the `poll` at its deadline (`timeout` from `now`), or of `controlLost`. Refused
    /// with RATE_LIMITED, it is sent again by `poll` after the relay's `retryAfterMillis` if
    /// that is before its deadline.
    public mutating func request(
        _ kind: SIMPMessage.Kind, room: String = "", users: [String] = [], now: NIODeadline, timeout: TimeAmount = requestTimeout,
        fill: (inout SIMPMessage) -> Void = { _ in }
    ) -> SIMPMessage {
        var request = SIMPMessage(kind: kind, messageId: nextRequestId, fromUser: configuration.user)
        request.room = room
        request.members = users
        fill(&request)
        nextRequestId += 1
        requestsAwaitingReply[request.messageId] = PendingRequest(frame: request, deadline: now + timeout)
        return request
    }

    /// Whether `message` is the reply to a request still waiting: ROOM_MEMBERS, WHO, KEYS_* or ERROR
    /// carrying the request's id.
    public func isReply(_ message: SIMPMessage) -> Bool {
        [.roomMembers, .who, .keysPublish, .keysFetch, .error].contains(message.kind) && requestsAwaitingReply[message.messageId] != nil
    }

    /// `message` taken as the reply to its request, if it is one. A RATE_LIMITED that leaves
    /// time before the request's deadline is no reply: the request waits to be sent again.
    mutating func takeReply(_ message: SIMPMessage, now: NIODeadline) -> RequestReply? {
        guard isReply(message) else { return nil }
        return settle(message.messageId, by: message, now: now)
    }

    /// The requests besides `messageId` that a RATE_LIMITED refused with it (its `receiptIds`:
    /// the relay tells everything it refused during one pause in one ERROR, docs/PROTOCOL.md
    /// §2.6): each waits to be sent again, or fails if that would be past its deadline.
    mutating func takeAlsoRefused(_ message: SIMPMessage, now: NIODeadline) -> [RequestReply] {
        guard message.kind == .error, message.errorCode == .rateLimited else { return [] }
        return message.receiptIds.compactMap { requestsAwaitingReply[$0] == nil ? nil : settle($0, by: message, now: now) }
    }

    /// Request `id` answered by `message` (or refused by it for now, then nil).
    private mutating func settle(_ id: UInt64, by message: SIMPMessage, now: NIODeadline) -> RequestReply? {
        guard var pending = requestsAwaitingReply[id] else { return nil }
        if message.kind == .error, message.errorCode == .rateLimited {
            let retryAt = now + .milliseconds(Int64(max(1, message.retryAfterMillis)))
            if retryAt < pending.deadline {
                pending.retryAt = retryAt
                requestsAwaitingReply[id] = pending
                return nil
            }
        }
        requestsAwaitingReply[id] = nil
        let refused = RequestReply.Failure.refused(code: message.errorCode, text: message.errorText)
        return RequestReply(requestId: id, result: message.kind == .error ? .failure(refused) : .success(message.members))
    }

    /// When a request is next due to be sent again or to time out.
    var nextRequestDeadline: NIODeadline? {
        requestsAwaitingReply.values.map { $0.retryAt ?? $0.deadline }.min()
    }

    /// Requests due again go out (while registered); those past their deadline fail.
    mutating func pollRequests(now: NIODeadline, into output: inout Output) {
        for (id, pending) in requestsAwaitingReply.sorted(by: { $0.key < $1.key }) {
            if pending.deadline <= now {
                requestsAwaitingReply[id] = nil
                output.replies.append(RequestReply(requestId: id, result: .failure(.timedOut)))
            } else if let retryAt = pending.retryAt, retryAt <= now, isRegistered {
                requestsAwaitingReply[id]?.retryAt = nil
                output.controlFrames.append(pending.frame)
            }
        }
    }

    /// Every request still waiting, failed: the connection they were sent on is gone.
    mutating func abandonRequests() -> [RequestReply] {
        defer { requestsAwaitingReply.removeAll() }
        return requestsAwaitingReply.keys.sorted().map { RequestReply(requestId: $0, result: .failure(.connectionLost)) }
    }
}
