/// The reply to a request on the control connection (ROOM_JOIN, ROOM_LEAVE, ROOM_MEMBERS, WHO):
/// the member or presence lines the relay answered with, or why there is none.
public struct RequestReply: Equatable, Sendable {
    /// Why a request has no answer.
    public enum Failure: Error, Equatable, Sendable {
        /// The relay answered with an ERROR carrying the request's id.
        case refused(code: SIMPMessage.ErrorCode, text: String)
        /// The control connection was lost before the answer came.
        case connectionLost
    }

    /// The id `ClientSession.request` gave the request frame.
    public var requestId: UInt64
    public var result: Result<[String], Failure>

    public init(requestId: UInt64, result: Result<[String], Failure>) {
        self.requestId = requestId
        self.result = result
    }
}

/// Requests and their replies (docs/PROTOCOL.md §7): the session numbers each request and
/// recognises its reply, so no shell matches frames to requests itself.
extension ClientSession {
    /// A request frame of `kind` for the control connection, with a fresh id; its reply comes
    /// in `Output.replies` of the `controlReceived` that brings it (or of `controlLost`).
    public mutating func request(_ kind: SIMPMessage.Kind, room: String = "", users: [String] = []) -> SIMPMessage {
        var request = SIMPMessage(kind: kind, messageId: nextRequestId, fromUser: configuration.user)
        request.room = room
        request.members = users
        nextRequestId += 1
        requestsAwaitingReply.insert(request.messageId)
        return request
    }

    /// Whether `message` is the reply to a request still waiting: ROOM_MEMBERS, WHO, KEYS_* or ERROR
    /// carrying the request's id.
    public func isReply(_ message: SIMPMessage) -> Bool {
        [.roomMembers, .who, .keysPublish, .keysFetch, .error].contains(message.kind) && requestsAwaitingReply.contains(message.messageId)
    }

    /// `message` taken as the reply to its request, if it is one.
    mutating func takeReply(_ message: SIMPMessage) -> RequestReply? {
        guard isReply(message) else { return nil }
        requestsAwaitingReply.remove(message.messageId)
        let refused = RequestReply.Failure.refused(code: message.errorCode, text: message.errorText)
        return RequestReply(requestId: message.messageId, result: message.kind == .error ? .failure(refused) : .success(message.members))
    }

    /// Every request still waiting, failed: the connection they were sent on is gone.
    mutating func abandonRequests() -> [RequestReply] {
        defer { requestsAwaitingReply.removeAll() }
        return requestsAwaitingReply.sorted().map { RequestReply(requestId: $0, result: .failure(.connectionLost)) }
    }
}
