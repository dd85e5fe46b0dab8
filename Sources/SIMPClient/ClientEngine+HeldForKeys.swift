import NIOCore
import SIMPCore

/// Messages that could not be sealed yet: typed while the relay was unreachable, to a peer whose
/// devices this device never learned (docs/PROTOCOL.md §4.8, "Sending"). Each keeps its id and
/// waits, as plaintext in the outbox on the user's own disk like the history, until the relay
/// is back; then the peer's devices are fetched and it is sealed and sent, once, in the order
/// typed. Later messages to the same peer wait behind it, so none overtakes another.
final class HeldForKeys {
    struct Entry {
        var message: SIMPMessage
        let promise: EventLoopPromise<SendResult>
    }

    fileprivate var entries: [Entry] = []
    /// Whether the first entry is being sealed now.
    fileprivate var sealing = false

    /// Whether a message to `peer` is waiting.
    func holds(messagesTo peer: String) -> Bool { entries.contains { $0.message.toUser == peer } }
}

/// The relay could not be asked for the peer's devices, and this device never learned them:
/// the message waits (`HeldForKeys`) instead of failing.
struct DevicesNotYetKnown: Error {}

extension ClientEngine {
    /// Seals `message` end to end (when that is on) and submits it; returns its id and outcome.
    /// A message that cannot be sealed before the relay is back is held (`HeldForKeys`).
    func sealAndSend(_ message: SIMPMessage) -> EventLoopFuture<(UInt64, EventLoopFuture<SendResult>)> {
        guard let endToEnd else { return eventLoop.makeSucceededFuture(send(message)) }
        if heldForKeys.holds(messagesTo: message.toUser) { return eventLoop.makeSucceededFuture(hold(message)) }
        return endToEnd.seal(message, via: self).map { [self] in sendSealed(message, $0) }.flatMapErrorThrowing { [self] error in
            guard error is DevicesNotYetKnown else { throw error }
            return hold(message)
        }
    }

    /// Submits `sealed`, noting `original` to send again if its receiver cannot decrypt it.
    private func sendSealed(_ original: SIMPMessage, _ sealed: SIMPMessage) -> (UInt64, EventLoopFuture<SendResult>) {
        let sent = send(sealed)
        endToEnd?.sent(original, sealed: sealed, id: sent.0, now: now)
        return sent
    }

    /// Keeps `message` (plaintext, with its id) in the outbox until it can be sealed.
    private func hold(_ message: SIMPMessage) -> (UInt64, EventLoopFuture<SendResult>) {
        var message = message
        if message.messageId == 0 { message.messageId = session.reserveMessageId() }
        if message.time == 0 { message.time = environment.wallClockMillis() }
        let promise = eventLoop.makePromise(of: SendResult.self)
        heldForKeys.entries.append(.init(message: message, promise: promise))
        saveInOutbox(message, id: message.messageId)
        logger.info("holding a message until the relay is back to fetch its receiver's keys", metadata: ["id": "\(message.messageId)"])
        return (message.messageId, promise.futureResult)
    }

    /// Registered again: seals and sends the held messages, oldest first, each after the one
    /// before it was submitted. One that cannot be sealed now (the relay lost again) waits for
    /// the next registration; one that can never be (the peer has no keys) fails.
    func sealHeldMessages() {
        guard !heldForKeys.sealing, let entry = heldForKeys.entries.first, let endToEnd, control != nil else { return }
        heldForKeys.sealing = true
        endToEnd.seal(entry.message, via: self).whenComplete { [self] result in
            heldForKeys.sealing = false
            switch result {
            case .failure(let error) where error is DevicesNotYetKnown: return
            case .failure(let error):
                heldForKeys.entries.removeFirst()
                settled(entry.message.messageId)
                let reason = (error as? SIMPClientError)?.description ?? "\(error)"
                entry.promise.succeed(.failed(messageId: entry.message.messageId, .rejected(.badRequest, reason)))
            case .success(let sealed):
                heldForKeys.entries.removeFirst()
                sendSealed(entry.message, sealed).1.cascade(to: entry.promise)
            }
            sealHeldMessages()
        }
    }

    /// The connection is lost for good: callers waiting for held messages learn it (the
    /// messages stay in the outbox for the next client of this device, and held here in case
    /// the user connects again: `connectAgain`). Returns their ids.
    func failHeldMessages() -> [UInt64] {
        for entry in heldForKeys.entries { entry.promise.succeed(.connectionLost(messageId: entry.message.messageId)) }
        return heldForKeys.entries.map(\.message.messageId)
    }
}
