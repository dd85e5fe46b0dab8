import NIOCore
import SIMPCore

/// What a client shell provides so that `carryOut` can interpret the `ClientSession.Output`
/// of its session: the effects themselves (bytes out, callbacks to the application), never
/// decisions. `ClientEngine` conforms (over sockets in production, over `EmbeddedChannel`s in
/// simp-lab's simulator), so the output of the one client core is interpreted in one place.
///
/// The session is borrowed while `take` runs (it counts what the application took): `take`
/// must not touch `session`. The other requirements run with no access to it in progress.
public protocol ClientShell: AnyObject {
    /// The session this shell drives.
    var session: ClientSession { get set }
    /// The allocator for sealed datagrams; nil while there is no way to send them (they are
    /// then not sealed either: the retransmission timer sends them again).
    var datagramAllocator: ByteBufferAllocator? { get }
    /// Offers a delivered message to the application, which may take `allowance` more new
    /// messages (nil: no limit); returns how many new messages it took: 0 (it had it already,
    /// before a restart, or it is not shown), 1, or more when the message let others that
    /// waited for it be handed over (room posts waiting for a sender key, docs/E2E.md §14.3).
    func take(_ message: SIMPMessage, allowance: Int?) -> Int
    /// Sends sealed datagrams to the relay, in order, as one burst.
    func sendDatagrams(_ datagrams: [ByteBuffer])
    /// Writes frames on the registered control connection, in order, as one burst.
    func writeControl(_ frames: [SIMPMessage])
    /// A sent message is still without a receipt after the policy's delay notice time.
    func messageDelayed(_ message: DelayedMessage)
    /// Called once per output, before any outcome is reported: counters may be read from
    /// `session` (a caller woken by an outcome may read them at once).
    func outputWillBeReported(_ output: ClientSession.Output)
    /// A message sent here has its outcome: delivered, failed, or stored for an offline
    /// receiver (its later news comes as a `DeliveryNotice`).
    func messageSettled(_ result: SendResult)
    /// News about messages stored for offline receivers, rooms and read markers.
    func noticeArrived(_ notice: DeliveryNotice)
    /// News about peers (typing, presence).
    func peerEventArrived(_ event: PeerEvent)
    /// A file datagram for the application's file transfers.
    func fileDatagramArrived(_ message: SIMPMessage)
    /// A room or WHO request has its answer, or will have none.
    func requestAnswered(_ requestId: UInt64, _ result: Result<[String], SIMPClientError>)
    /// The relay stopped answering: close the control connection (and then tell the session
    /// with `controlLost`).
    func closeControl()
    /// Connect again after `delay` (attempt number `attempt` since the last success).
    func reconnect(attempt: Int, after delay: TimeAmount)
    /// Keep one timer at `deadline` (none if nil) that calls `session.poll`.
    func armTimer(at deadline: NIODeadline?)
    /// The session's datagrams now go this way (docs/PROTOCOL.md §5.5): tell the user. The
    /// default does nothing.
    func datagramPathChanged(to path: DatagramPath)
    /// Called after the delivered messages were handed over and before anything of `output`
    /// is written: a shell that keeps state the output's receipts or sealed messages depend
    /// on makes it durable here, and takes out what cannot leave yet (docs/E2E.md §15). The
    /// default does nothing.
    func willWrite(_ output: inout ClientSession.Output)
}

extension ClientShell {
    public func datagramPathChanged(to path: DatagramPath) {}
    public func willWrite(_ output: inout ClientSession.Output) {}
    public func fileDatagramArrived(_ message: SIMPMessage) {}
}

extension ClientShell {
    /// Carries out `output` of `session`: the one interpreter of the client core's output.
    public func carryOut(_ output: ClientSession.Output) {
        var output = output
        // First: the receipts below say the application has them.
        if !output.delivered.isEmpty { session.handOver(&output) { take($0, allowance: $1) } }
        willWrite(&output)
        var controlFrames = output.controlFrames
        if let allocator = datagramAllocator, !output.datagrams.isEmpty {
            let sealed = output.datagrams.compactMap { session.seal($0, allocator: allocator) }
            if session.datagramPath == .control {
                controlFrames += sealed.map(SIMPMessage.carrying) // in DATAGRAM frames (docs/PROTOCOL.md §5.5)
            } else if !sealed.isEmpty {
                sendDatagrams(sealed)
            }
        }
        if let allocator = datagramAllocator, !output.udpProbes.isEmpty {
            sendDatagrams(output.udpProbes.compactMap { session.seal($0, allocator: allocator) })
        }
        if !controlFrames.isEmpty { writeControl(controlFrames) }
        if let path = output.pathChanged { datagramPathChanged(to: path) }
        for message in output.delayed { messageDelayed(message) }
        outputWillBeReported(output)
        for outcome in output.outcomes { messageSettled(SendResult(outcome)) }
        for notice in output.notices {
            if case .stored(let id, _, let receiverOnline) = notice { messageSettled(.stored(messageId: id, receiverOnline: receiverOnline)) }
            noticeArrived(notice)
        }
        output.peerEvents.forEach(peerEventArrived)
        output.fileDatagrams.forEach(fileDatagramArrived)
        for reply in output.replies {
            requestAnswered(reply.requestId, reply.result.mapError(SIMPClientError.init))
        }
        if output.closeControl { closeControl() }
        if let plan = output.reconnect { reconnect(attempt: plan.attempt, after: plan.delay) }
        armTimer(at: session.nextDeadline)
    }
}

extension SendResult {
    /// The message this is the outcome of.
    public var messageId: UInt64 {
        switch self {
        case .delivered(let id, _, _), .failed(let id, _), .stored(let id, _), .connectionLost(let id): id
        }
    }

    /// The outcome the sender reported for a message.
    init(_ event: SenderEvent) {
        switch event {
        case .delivered(let id, _, let latency, let attempts): self = .delivered(messageId: id, latency: latency, attempts: attempts)
        case .failed(let id, _, let failure): self = .failed(messageId: id, failure)
        }
    }
}

extension SIMPClientError {
    /// Why a request has no answer, as the application's error.
    init(_ failure: RequestReply.Failure) {
        switch failure {
        case .refused(let code, let text): self = .rejected(code, text)
        case .connectionLost: self = .connectionLost
        case .timedOut: self = .timedOut("waiting for the relay's answer")
        }
    }
}
