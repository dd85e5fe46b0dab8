import NIOCore

/// A client's protocol logic, without I/O: the `ReliableSender` and `ReceiverCore` for
/// messages, the `Heartbeat` of the control connection, the `Backoff` of reconnecting and the
/// UDP keepalive, wired together the way SIMP needs:
///
/// - a control connection first logs in (`beginLogin`, `loginReceived`); nothing goes out
///   before the relay accepted it;
/// - every datagram is sealed with the session's keys (`seal`, `datagramArrived` opens), and a
///   HELLO datagram, repeated until the relay answers, tells the relay the client's address;
/// - a lost control connection suspends sending (nothing is given up meanwhile) and plans a
///   reconnect; after the next CONNECTED everything unreceipted is sent again;
/// - one deadline (`nextDeadline`) covers retransmissions, held messages, pings and keepalives.
///
/// `SIMPClient` drives it over SwiftNIO sockets and the loss simulator over simulated links.
public struct ClientSession: Sendable {
    /// The UDP keepalive's default interval: under the 30 s after which many NATs drop an idle
    /// UDP mapping, and each one costs the relay a HELLO opened and answered, so no shorter.
    public static let defaultKeepaliveInterval: TimeAmount = .seconds(25)

    /// Settings of one client.
    public struct Configuration: Sendable {
        public var user: String
        public var retransmit = RetransmitPolicy()
        public var heartbeat = HeartbeatPolicy.client
        /// A receipt written to the control connection is confirmed by a PING sent at most
        /// this long after it (its PONG proves the relay read the receipt, `ReceiptLedger`),
        /// whatever the heartbeat: pings wait for silence, a receiving client is rarely silent.
        public var receiptConfirmDelay: TimeAmount = .seconds(5)
        /// While messages wait behind a gap, the relay is watched this closely instead (a PING
        /// after 5 s of silence, given up after 15 s), so that a dead relay is noticed, and the
        /// hold clock stopped (`ReceiverCore.stopHoldClock`), before `orderingHoldLimit` skips
        /// a gap that the relay could still fill after a reconnect.
        public var heartbeatWhileHolding = HeartbeatPolicy(interval: .seconds(5), missLimit: 3)
        /// nil: a lost relay is reported, not reconnected.
        public var reconnect: ReconnectPolicy? = ReconnectPolicy()
        /// The UDP keepalive (on UDP a HELLO probe round, docs/PROTOCOL.md §4.4) goes this often.
        public var keepaliveInterval = ClientSession.defaultKeepaliveInterval
        /// How long a message that arrived early waits for an earlier one before the gap is
        /// skipped (`ReceiverCore.holdLimit`).
        public var orderingHoldLimit: TimeAmount = .seconds(30)
        /// Receipt a message held behind a gap only when the application gets it, with a HELD
        /// receipt on arrival meanwhile (`ReceiverCore.receiptsWhenReleased`, docs/PROTOCOL.md
        /// §6.1). Off: held messages are receipted on arrival, as clients before HELD receipts
        /// did, and are lost if the process stops before the gap fills.
        public var receiptsWhenReleased = true
        /// The first message id (and stream id); later ids count up from it.
        public var firstMessageId: UInt64
        /// The user's password; nil for relays that do not authenticate.
        public var password: String?
        /// The device this session logs in as, named in AUTH and CONNECT (docs/PROTOCOL.md
        /// §4.7); "" is the user's default device.
        public var device = ""
        /// A send-only session (CONNECT says so): never a route for content, never given stored
        /// messages.
        public var sendOnly = false
        /// CONNECT asks the relay to show this user's presence and last-seen to nobody
        /// (docs/PROTOCOL.md §4.8).
        public var hidePresence = false
        /// HELLO is repeated this often until the relay answers, at most `helloAttempts` times.
        public var helloInterval: TimeAmount = .milliseconds(250)
        public var helloAttempts = 20
        /// When datagrams move to the control connection because UDP does not get through, and
        /// back (docs/PROTOCOL.md §5.5); nil: always UDP (HELLO repeated `helloAttempts` times,
        /// a PING datagram as keepalive), as clients before the fallback.
        public var datagramPaths: DatagramPathPolicy? = DatagramPathPolicy()
        /// Also send each receipt as a datagram, which no TCP loss can hold up; the control
        /// channel's copy stays the reliable one (docs/PROTOCOL.md §6.1).
        public var receiptDatagrams = true
        /// Content transmissions are paced under this rate (`SendPacer`): the relay's default
        /// per-user limit with a 10 % margin, for a relay that does not announce its limit; one
        /// that does (CONNECTED `messageRateLimit`) is paced at 90 % of it. nil sends unpaced.
        public var pacing: RateLimit? = ClientSession.defaultPacing
        /// Send a receiver's receipts in batches, one per sender (docs/PROTOCOL.md §6.1): a
        /// receipt waits up to `receiptBatchDelay` for others to the same sender. Off: one
        /// receipt per message, as clients before batches.
        public var batchesReceipts = false
        /// The application takes at most this many new messages (`simp listen --count`); nil: no
        /// limit. See `handOver(_:to:)`; receipts are then sent singly, whatever
        /// `batchesReceipts` says (a batch would mix taken and untaken messages).
        public var deliveryLimit: Int?
        /// How long a batched receipt waits for others: the batches waiting go out when the
        /// oldest receipt in them has waited this long (`poll`). Zero: at the end of each burst
        /// of datagram reads (`datagramBurstEnded`), as clients did before the delay.
        public var receiptBatchDelay: TimeAmount = ReceiptBatcher.defaultDelay
        /// With batches on, a receipt's datagram copy also repeats the ids of the previous copy
        /// to the same sender if that went at most this long ago (`ReceiptRepeater`). Zero: a
        /// copy carries its own ids only.
        public var receiptRepeatWindow: TimeAmount = ReceiptRepeater.defaultWindow
        /// The relays to connect to, by name (`HOST:PORT`), the first one first; after a lost
        /// connection the next one is tried (`ConnectionLifecycle`).
        public var relays = ["relay"]
        /// How long a relay has to accept a login once the control connection is open.
        public var loginTimeout: TimeAmount = .seconds(5)

        public init(user: String, firstMessageId: UInt64, password: String? = nil) {
            self.user = user
            self.firstMessageId = firstMessageId
            self.password = password
        }
    }

    /// `RelayCore.Configuration.defaultMessageLimit` (500/s) less 10 %, with a burst of 50
    /// rather than the relay's 1,000: a burst of hundreds of retransmissions (two datagrams
    /// each) reordered by the link lands outside the relay's 1,024-counter replay window and is
    /// dropped as replayed (docs/PROTOCOL.md §6.2).
    public static let defaultPacing = RateLimit(perSecond: 450, burst: 50)

    public let configuration: Configuration
    public internal(set) var sender: ReliableSender
    public internal(set) var receiver: ReceiverCore
    /// Where the session is with the relay: no control connection, logging in, or registered,
    /// each with what only that phase has. Whether it stopped for good is `stopped`.
    public internal(set) var phase: Phase = .disconnected
    var backoff: Backoff?
    /// Which relay is next, the login's deadline, whether the user closed the client
    /// (`ClientSession+Lifecycle`); the shell calls its entry points for the first connect and the login.
    public var lifecycle: ConnectionLifecycle
    /// Messages that wait for their receiver's keys before they can be sealed.
    public var heldForKeys: HeldForKeysQueue
    /// Messages kept in memory while the outbox cannot be written, and when it is tried again.
    public var outboxKeeping = OutboxKeeping()
    var nextPingId: UInt64 = 1
    var login: LoginClient
    /// The keys of the last session the relay accepted (kept between connections: datagrams of
    /// that session may still arrive).
    var sealer: DatagramSealer?
    var opener: DatagramOpener?
    /// The datagram path and its probes (nil: always UDP); kept across connections.
    var paths: DatagramPathSelector?
    /// Datagrams dropped because they were not authentic for the current session.
    public internal(set) var rejectedDatagrams = 0
    /// Whether content is still taken (false after `stopTakingMessages`).
    public internal(set) var takesMessages = true
    /// New messages the application took (`handOver`), counted against `deliveryLimit`.
    public internal(set) var messagesTaken = 0
    /// RATE_LIMITED notices from the relay: it dropped some of this client's datagrams.
    public internal(set) var throttleNotices = 0
    /// Receipts sent as datagrams (besides their control-channel copies).
    public internal(set) var receiptDatagramsSent = 0
    /// Receipt frames written to the control channel (single receipts and batches).
    public internal(set) var receiptFramesSent = 0
    var nextSignalId: UInt64 = 1
    /// The id of the next request (`request`), and those sent that wait for their reply.
    var nextRequestId: UInt64 = 1
    var requestsAwaitingReply: [UInt64: PendingRequest] = [:]
    var receipts = ReceiptLedger()
    var batcher: ReceiptBatcher
    var repeater: ReceiptRepeater
    /// An arrival of the current read burst suggested loss: the batched receipts go at its end.
    var receiptsAreUrgent = false
    /// The relay of the current session routes batch receipts (its CONNECTED said so).
    public internal(set) var relayBatchesReceipts = false
    /// Receipts owed to the relay: written but not yet confirmed by a PONG, or waiting for a
    /// control connection (they are sent again after the next login).
    public var receiptsOwed: Int { receipts.count }

    /// Why a session stops for good: it does not reconnect (docs/PROTOCOL.md §2.6, §4.7).
    public enum Stop: Equatable, Sendable {
        /// A newer session of this device took the relay session over (ERROR
        /// ALREADY_CONNECTED on the registered connection): reconnecting would fight it.
        case takenOver(reason: String)
        /// The relay refused a login (ERROR AUTH_FAILED: wrong password, no such user, or the
        /// user is locked), or refused the device over a limit (ERROR LIMIT_REACHED: the user has
        /// as many devices as the relay allows): trying again cannot succeed.
        case loginRefused(reason: String)
        /// The relay ended the session because its access token expired without a new one
        /// (ERROR TOKEN_SESSION_EXPIRED): logging in again needs a new token.
        case tokenExpired(reason: String)
    }

    /// Set once the session has stopped for good; nil while it keeps (re)connecting. An
    /// operator's ERROR SESSION_ENDED does not stop it: it logs in again, and stops only if
    /// that login is refused.
    public internal(set) var stopped: Stop?

    /// The user asks to connect again after the session stopped for good (`simp chat`'s
    /// `/reconnect`, say once the operator unlocked the user): it is no longer stopped, and the
    /// backoff starts afresh. Returns false (nothing to do) when it had not stopped.
    public mutating func resumeAfterStop() -> Bool {
        guard stopped != nil else { return false }
        stopped = nil
        backoff?.reset()
        return true
    }

    public init(configuration: Configuration) {
        self.configuration = configuration
        self.login = LoginClient(user: configuration.user, password: configuration.password)
        self.receiver = ReceiverCore(holdLimit: configuration.orderingHoldLimit, receiptsWhenReleased: configuration.receiptsWhenReleased)
        self.sender = ReliableSender(firstMessageId: configuration.firstMessageId, policy: configuration.retransmit, pacing: configuration.pacing)
        self.backoff = configuration.reconnect.map(Backoff.init)
        self.lifecycle = ConnectionLifecycle(relays: configuration.relays, loginTimeout: configuration.loginTimeout)
        self.heldForKeys = HeldForKeysQueue(giveUpAfter: configuration.retransmit.giveUpAfter)
        self.batcher = ReceiptBatcher(delay: configuration.receiptBatchDelay)
        self.repeater = ReceiptRepeater(window: configuration.receiptRepeatWindow)
        self.paths = configuration.datagramPaths.map(DatagramPathSelector.init)
        sender.suspend() // nothing goes out before the relay accepted CONNECT
    }

    /// Whether a registered control connection is up.
    public var isRegistered: Bool { phase.registration != nil }

    /// When `poll` next has work, if ever.
    public var nextDeadline: NIODeadline? {
        let registration = phase.registration
        return [
            sender.nextDeadline, receiver.nextDeadline, registration?.heartbeat.nextDeadline, registration?.nextKeepalive,
            registration?.nextHello?.due, batcher.nextDeadline, registration?.receiptConfirmPing,
            receiver.heldCount > 0 ? registration?.holdingHeartbeat.nextDeadline : nil,
            // The path is polled only while registered (`pollDatagramPath`); what it noted while the
            // control connection was down waits for the next login.
            registration == nil ? nil : paths?.nextDeadline, nextRequestDeadline,
        ]
        .compactMap { $0 }.min()
    }

    /// The largest datagram the relay accepts: from its last CONNECTED, else the default.
    public internal(set) var maxDatagramSize = SealedDatagram.defaultMaxDatagramSize

    /// The application sends a content message; `fromUser` is filled in. A message too large
    /// for the relay fails at once (`DeliveryFailure.tooLarge`) instead of being sent.
    public mutating func submit(_ message: SIMPMessage, now: NIODeadline) -> (messageId: UInt64, output: Output) {
        var message = message
        message.fromUser = configuration.user
        var output = Output()
        let size = sealedSizeBound(of: message)
        guard size <= maxDatagramSize else {
            let id = sender.skipMessageId()
            output.outcomes.append(.failed(messageId: id, to: message.toUser, .tooLarge(size: size, limit: maxDatagramSize)))
            return (id, output)
        }
        let (id, sent) = sender.submit(message, now: now)
        output.absorb(sent)
        noteContentSent(output, now: now)
        suspectSilentRelay(now: now, into: &output)
        return (id, output)
    }

    /// Takes the next message id without sending anything: a message submitted later with it
    /// (its `messageId` set) keeps the place it was typed in (the client holds a message it
    /// cannot seal yet under such an id).
    public mutating func reserveMessageId() -> UInt64 { sender.skipMessageId() }

    /// The most bytes `message` can take as a sealed datagram, with the fields the sender fills
    /// in (id, stream, seq, floor, custodyFloor, attempt) at their largest likely sizes.
    func sealedSizeBound(of message: SIMPMessage) -> Int {
        var probe = message
        if probe.messageId == 0 { probe.messageId = .max }
        (probe.stream, probe.seq, probe.floor) = (.max, UInt64(UInt32.max), UInt64(UInt32.max))
        probe.custodyFloor = UInt64(UInt32.max)
        probe.attempt = 16_383 // the largest two-byte varint: far more transmissions than fit in giveUpAfter
        if probe.time == 0 { probe.time = Int64(Int32.max) << 16 } // a wall clock in ms, well past 2100
        return MessageCodec.encodedSize(of: probe) + SealedDatagram.overhead
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

    /// File datagrams (FILE_CHUNK, FILE_ACK) of the application's transfers, sent as they
    /// are: the transfer, not the session, recovers their losses (docs/PROTOCOL.md §5.6).
    public mutating func sendFileDatagrams(_ messages: [SIMPMessage]) -> Output {
        var output = Output()
        guard isRegistered else { return output }
        output.datagrams = messages.map { message in
            var message = message
            message.fromUser = configuration.user
            return message
        }
        return output
    }

    /// Tells `sender` this user has seen its messages up to id `upTo` (a READ over the control
    /// connection; nothing while the relay is unreachable).
    public mutating func markRead(from sender: String, upTo: UInt64, now: NIODeadline) -> Output {
        var output = Output()
        guard isRegistered else { return output }
        // A READ must not overtake the receipts it implies, still waiting in a batch.
        flushReceipts(now: now, into: &output)
        output.controlFrames.append(SIMPMessage(kind: .read, messageId: upTo, fromUser: configuration.user, toUser: sender))
        return output
    }

    /// The deadline passed: release held messages, ping or give up the relay, keep the NAT
    /// mapping alive, retransmit.
    public mutating func poll(now: NIODeadline) -> Output {
        var output = pollHello(now: now)
        pollRequests(now: now, into: &output)
        release(receiver.poll(now: now), now: now, into: &output)
        if let due = batcher.nextDeadline, due <= now { flushReceipts(now: now, into: &output) }
        guard var registration = phase.registration else {
            output.absorb(sender.poll(now: now))
            return output
        }
        var pings = registration.receiptConfirmPing.map { $0 <= now } ?? false
        var beats = [registration.heartbeat.poll(now: now)]
        if receiver.heldCount > 0 { beats.append(registration.holdingHeartbeat.poll(now: now)) }
        if beats.contains(.peerDead) {
            output.closeControl = true
        } else if beats.contains(.sendPing) {
            pings = true
        }
        if pings && !output.closeControl {
            output.controlFrames.append(SIMPMessage(kind: .ping, messageId: nextPingId, fromUser: configuration.user))
            nextPingId += 1
            registration.receiptConfirmPing = nil
        }
        let keepaliveDue = registration.nextKeepalive <= now
        if keepaliveDue { registration.nextKeepalive = now + configuration.keepaliveInterval }
        phase = .registered(registration)
        if keepaliveDue { keepAlive(now: now, into: &output) }
        pollDatagramPath(now: now, into: &output)
        output.absorb(sender.poll(now: now))
        noteContentSent(output, now: now)
        suspectSilentRelay(now: now, into: &output)
        return output
    }

    /// Content is going out (in `output`): a relay silent for the heartbeat's `suspectAfter` is
    /// pinged now (it should answer, and the message's receipt comes over the control
    /// connection anyway) and given up unless heard within `answerWithin`, so a dead relay is
    /// noticed within seconds of a send, while an idle session pings rarely.
    private mutating func suspectSilentRelay(now: NIODeadline, into output: inout Output) {
        guard var registration = phase.registration, output.datagrams.contains(where: \.kind.isContent), registration.heartbeat.suspect(now: now)
        else { return }
        if !output.controlFrames.contains(where: { $0.kind == .ping }) {
            output.controlFrames.append(SIMPMessage(kind: .ping, messageId: nextPingId, fromUser: configuration.user))
            nextPingId += 1
            registration.receiptConfirmPing = nil
        }
        phase = .registered(registration)
    }
}
