import NIOCore

/// A client's protocol logic, without I/O: the `ReliableSender` and `ReceiverCore` for
/// messages, the `Heartbeat` of the control connection, the `Backoff` of reconnecting and the
/// UDP keepalive, wired together the way SIMP needs:
///
/// - nothing goes out before the relay accepted CONNECT (`registered`);
/// - a lost control connection suspends sending (nothing is given up meanwhile) and plans a
///   reconnect; after the next CONNECTED everything unreceipted is sent again;
/// - one deadline (`nextDeadline`) covers retransmissions, held messages, pings and keepalives.
///
/// `SIMPClient` drives it over SwiftNIO sockets and the loss simulator over simulated links.
public struct ClientSession: Sendable {
    /// Settings of one client.
    public struct Configuration: Sendable {
        public var user: String
        public var retransmit = RetransmitPolicy()
        public var heartbeat = HeartbeatPolicy()
        /// nil: a lost relay is reported, not reconnected.
        public var reconnect: ReconnectPolicy? = ReconnectPolicy()
        public var keepaliveInterval: TimeAmount = .seconds(10)
        /// The first message id (and stream id); later ids count up from it.
        public var firstMessageId: UInt64

        public init(user: String, firstMessageId: UInt64) {
            self.user = user
            self.firstMessageId = firstMessageId
        }
    }

    /// What the shell must do after a call.
    public struct Output: Equatable, Sendable {
        /// Datagrams for the relay's UDP port.
        public var datagrams: [SIMPMessage] = []
        /// Frames for the registered control connection.
        public var controlFrames: [SIMPMessage] = []
        /// Messages for the application, in order.
        public var delivered: [SIMPMessage] = []
        /// Outcomes of sent messages.
        public var outcomes: [SenderEvent] = []
        /// News about messages stored for offline receivers (stored, delivered later, discarded),
        /// room progress and read markers.
        public var notices: [DeliveryNotice] = []
        /// News about peers: typing, presence.
        public var peerEvents: [PeerEvent] = []
        /// The relay stopped answering: close the control connection (then call `controlLost`).
        public var closeControl = false
        /// Connect again after `delay`; this is attempt number `attempt` since the last success.
        public var reconnect: (attempt: Int, delay: TimeAmount)?

        public init() {}

        public static func == (a: Output, b: Output) -> Bool {
            a.datagrams == b.datagrams && a.controlFrames == b.controlFrames && a.delivered == b.delivered
                && a.outcomes == b.outcomes && a.notices == b.notices && a.peerEvents == b.peerEvents
            && a.closeControl == b.closeControl
                && a.reconnect?.attempt == b.reconnect?.attempt && a.reconnect?.delay == b.reconnect?.delay
        }

        mutating func absorb(_ sender: SenderOutput) {
            datagrams += sender.transmit
            outcomes += sender.events
        }
    }

    public let configuration: Configuration
    public private(set) var sender: ReliableSender
    public private(set) var receiver = ReceiverCore()
    private var heartbeat: Heartbeat?
    private var backoff: Backoff?
    private var nextKeepalive: NIODeadline?
    private var nextPingId: UInt64 = 1
    private var nextSignalId: UInt64 = 1

    public init(configuration: Configuration) {
        self.configuration = configuration
        self.sender = ReliableSender(firstMessageId: configuration.firstMessageId, policy: configuration.retransmit)
        self.backoff = configuration.reconnect.map(Backoff.init)
        sender.suspend() // nothing goes out before the relay accepted CONNECT
    }

    /// Whether a registered control connection is up.
    public var isRegistered: Bool { heartbeat != nil }

    /// When `poll` next has work, if ever.
    public var nextDeadline: NIODeadline? {
        [sender.nextDeadline, receiver.nextDeadline, heartbeat?.nextDeadline, nextKeepalive].compactMap { $0 }.min()
    }

    /// The application sends a content message; `fromUser` is filled in.
    public mutating func submit(_ message: SIMPMessage, now: NIODeadline) -> (messageId: UInt64, output: Output) {
        var message = message
        message.fromUser = configuration.user
        let (id, sent) = sender.submit(message, now: now)
        var output = Output()
        output.absorb(sent)
        return (id, output)
    }

    /// The relay accepted CONNECT: start the heartbeat and keepalive, reset the backoff, and
    /// send everything unreceipted and waiting.
    public mutating func registered(now: NIODeadline) -> Output {
        heartbeat = Heartbeat(policy: configuration.heartbeat, now: now)
        nextKeepalive = now + configuration.keepaliveInterval
        backoff?.reset()
        var output = Output()
        output.absorb(sender.resume(now: now))
        return output
    }

    /// The registered control connection is gone. Sending is suspended; with a reconnect
    /// policy (and `mayReconnect`), `reconnect` says when to try again. `random` is in [0, 1).
    public mutating func controlLost(mayReconnect: Bool, random: Double) -> Output {
        heartbeat = nil
        nextKeepalive = nil
        sender.suspend()
        return mayReconnect ? connectAttemptFailed(random: random) : Output()
    }

    /// A connect attempt (TCP or CONNECT) failed: plan the next one, if reconnecting.
    public mutating func connectAttemptFailed(random: Double) -> Output {
        var output = Output()
        output.reconnect = backoff?.next(random: random)
        return output
    }

    /// A frame arrived on the registered control connection.
    public mutating func controlReceived(_ message: SIMPMessage, now: NIODeadline) -> Output {
        heartbeat?.heard(at: now)
        var output = Output()
        switch message.kind {
        case .receipt where message.status == .stored || message.status == .roomDelivered:
            // The receiver is offline, or it is a room post: the message is settled (no more
            // retries), not delivered.
            let settled = sender.handleReceipt(message, now: now)
            output.datagrams += settled.transmit
            for event in settled.events {
                guard case .delivered(let id, let to, _, _) = event else { output.outcomes.append(event); continue }
                output.notices.append(.stored(messageId: id, to: to))
            }
            if message.status == .roomDelivered {
                output.notices.append(.roomProgress(
                    messageId: message.messageId, room: message.room,
                    delivered: Int(message.deliveredCount), of: Int(message.memberCount)))
            }
        case .receipt:
            let wasPending = sender.isPending(message.messageId)
            output.absorb(sender.handleReceipt(message, now: now))
            if !wasPending, message.status == .deliveredFromInbox {
                output.notices.append(.delivered(messageId: message.messageId, to: message.fromUser))
            }
        case .read:
            output.notices.append(.read(upTo: message.messageId, by: message.fromUser))
        case .presence:
            output.peerEvents.append(.presence(user: message.fromUser, online: message.online, lastSeen: message.lastSeen))
        case .error where message.errorCode == .inboxFull || message.errorCode == .inboxExpired:
            output.notices.append(.discarded(messageId: message.messageId, to: message.fromUser, message.errorCode, message.errorText))
        case .error where message.messageId != 0 && sender.isPending(message.messageId):
            output.absorb(sender.handleRejection(
                messageId: message.messageId, code: message.errorCode, reason: message.errorText, now: now))
        case .ping:
            var pong = SIMPMessage(kind: .pong, messageId: message.messageId)
            pong.time = message.time
            output.controlFrames.append(pong)
        default:
            break
        }
        return output
    }

    /// A content datagram arrived at `arrivedAt`: receipt it (over the control connection) and
    /// hand over what is now in order.
    public mutating func datagramReceived(_ message: SIMPMessage, arrivedAt: NIODeadline, now: NIODeadline) -> Output {
        if message.kind == .typing {
            var output = Output()
            output.peerEvents.append(.typing(from: message.fromUser))
            return output
        }
        let outcome = receiver.receive(message, arrivedAt: arrivedAt, now: now)
        var output = Output()
        if isRegistered { output.controlFrames.append(outcome.receipt) }
        output.delivered = outcome.deliver
        return output
    }

    /// Tells `user` this user is typing: one datagram, never retransmitted (nothing while the
    /// relay is unreachable).
    public mutating func typing(to user: String) -> Output {
        var output = Output()
        guard isRegistered else { return output }
        output.datagrams.append(SIMPMessage(kind: .typing, messageId: nextSignalId, fromUser: configuration.user, toUser: user))
        nextSignalId += 1
        return output
    }

    /// Tells `sender` this user has seen its messages up to id `upTo` (a READ over the control
    /// connection; nothing while the relay is unreachable).
    public mutating func markRead(from sender: String, upTo: UInt64) -> Output {
        var output = Output()
        guard isRegistered else { return output }
        output.controlFrames.append(SIMPMessage(kind: .read, messageId: upTo, fromUser: configuration.user, toUser: sender))
        return output
    }

    /// The deadline passed: release held messages, ping or give up the relay, keep the NAT
    /// mapping alive, retransmit.
    public mutating func poll(now: NIODeadline) -> Output {
        var output = Output()
        output.delivered = receiver.poll(now: now)
        switch heartbeat?.poll(now: now) ?? .none {
        case .none: break
        case .sendPing:
            let ping = SIMPMessage(kind: .ping, messageId: nextPingId, fromUser: configuration.user)
            nextPingId += 1
            output.controlFrames.append(ping)
        case .peerDead:
            output.closeControl = true
        }
        if let keepalive = nextKeepalive, keepalive <= now {
            output.datagrams.append(SIMPMessage(kind: .ping, fromUser: configuration.user))
            nextKeepalive = now + configuration.keepaliveInterval
        }
        output.absorb(sender.poll(now: now))
        return output
    }
}
