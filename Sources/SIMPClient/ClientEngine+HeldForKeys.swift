import NIOCore
import SIMPCore

/// Messages that could not be sealed yet (docs/PROTOCOL.md §4.8, "Sending"): the relay could
/// not be asked for the receiver's devices (unreachable, its store failing, no answer in time)
/// and this device never learned them, or the receiver has published no keys yet (it never
/// logged in). Each keeps its id and waits, as plaintext in the outbox on the user's own disk like
/// the history, and is sealed and sent, once, in the order typed, when the keys come: at the next
/// login, at the next try (`KeyWait`), or when the relay tells of the receiver's first bundle.
/// Later messages to the same receiver wait behind it, so none overtakes another; messages to
/// other receivers do not wait for it.
final class HeldForKeys {
    struct Entry {
        var message: SIMPMessage
        let promise: EventLoopPromise<SendResult>
        /// When it was held: a message held for the relay is given up at its give-up time.
        let heldAt: NIODeadline
    }

    fileprivate var entries: [Entry] = []
    /// Receivers whose first held message is being sealed now.
    fileprivate var sealing: Set<String> = []
    /// The next try for each receiver's held messages.
    fileprivate var retries: [String: Scheduled<Void>] = [:]
    /// Receivers whose user was told that messages wait for their first login.
    fileprivate var toldWaiting: Set<String> = []

    /// Whether a message to `peer` is waiting.
    func holds(messagesTo peer: String) -> Bool { entries.contains { $0.message.toUser == peer } }

    /// Whether `error` from `EndToEnd.seal` means the message waits (rather than fails).
    fileprivate static func waits(_ error: Error) -> Bool { error is DevicesNotYetKnown || error is AwaitingFirstKeys }

    /// Why a held message that can never be sealed failed: the relay's refusal when it refused
    /// (asked for the receiver's keys), else refused here (`notSent`), saying why and what to do
    /// (a verified contact's changed key names how to accept it).
    static func failure(_ error: Error) -> DeliveryFailure {
        switch error as? SIMPClientError {
        case .rejected(let code, let text)?: .rejected(code, text)
        case .notEncryptable(let reason)?: .notSent(reason)
        case let error?: .notSent(error.description)
        case nil: .notSent("\(error)")
        }
    }
}

/// The relay could not be asked for the peer's devices, and this device never learned them:
/// the message waits (`HeldForKeys`) instead of failing, and is tried again at `retry` (nil:
/// at the next login).
struct DevicesNotYetKnown: Error {
    var retry: NIODeadline? = nil
}

/// The peer has published no end-to-end keys yet (it never logged in): the message waits
/// (`HeldForKeys`) until it does, and the relay is asked again at `recheck`.
struct AwaitingFirstKeys: Error {
    var recheck: NIODeadline
}

extension ClientEngine {
    /// Seals `message` end to end (when that is on) and submits it; returns its id and outcome.
    /// A message that cannot be sealed yet is held (`HeldForKeys`). Answers once the message is
    /// durable in the outbox (ClientEngine+Outbox), so that what the user sees as sent is kept.
    package func sealAndSend(_ message: SIMPMessage) -> EventLoopFuture<(UInt64, EventLoopFuture<SendResult>)> {
        guard let endToEnd else { return whenKept(send(message)) }
        if heldForKeys.holds(messagesTo: message.toUser) { return whenKept(hold(message)) }
        return endToEnd.seal(message, via: self).map { [self] in sendSealed(message, $0) }.flatMapErrorThrowing { [self] error in
            guard HeldForKeys.waits(error) else { throw error }
            let held = hold(message)
            keepWaiting(for: message.toUser, because: error)
            return held
        }.flatMap { [self] in whenKept($0) }
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
        heldForKeys.entries.append(.init(message: message, promise: promise, heldAt: now))
        saveInOutbox(message, id: message.messageId)
        logger.info("holding a message until its receiver's keys can be had", metadata: ["id": "\(message.messageId)"])
        return (message.messageId, promise.futureResult)
    }

    /// The first held message to `peer` could not be sealed yet: it is tried again when
    /// `KeyWait` said, and the user learns once that messages wait for `peer`'s first login.
    private func keepWaiting(for peer: String, because error: Error) {
        let next: NIODeadline?
        switch error {
        case let error as AwaitingFirstKeys:
            next = error.recheck
            if heldForKeys.toldWaiting.insert(peer).inserted { endToEnd?.onNotice(.waitingForFirstLogin(user: peer)) }
        case let error as DevicesNotYetKnown: next = error.retry
        default: next = nil
        }
        heldForKeys.retries.removeValue(forKey: peer)?.cancel()
        guard let next else { return } // the next login tries again
        heldForKeys.retries[peer] = schedule(at: next) { [self] in
            heldForKeys.retries[peer] = nil
            sealHeld(to: peer)
        }
    }

    /// Registered again: seals and sends the held messages of every receiver, oldest first.
    func sealHeldMessages() {
        var peers: [String] = []
        for entry in heldForKeys.entries where !peers.contains(entry.message.toUser) { peers.append(entry.message.toUser) }
        for peer in peers { sealHeld(to: peer) }
    }

    /// Seals and sends the held messages to `peer`, oldest first, each after the one before it
    /// was submitted (now: the relay told of `peer`'s new keys, or it is time to try again). One
    /// that cannot be sealed yet waits for the next try; one held for the relay past its give-up
    /// time, or that can never be sealed, fails.
    func sealHeld(to peer: String) {
        guard let endToEnd, control != nil, !heldForKeys.sealing.contains(peer),
            let entry = heldForKeys.entries.first(where: { $0.message.toUser == peer })
        else { return }
        heldForKeys.retries.removeValue(forKey: peer)?.cancel()
        heldForKeys.sealing.insert(peer)
        endToEnd.seal(entry.message, via: self).whenComplete { [self] result in
            heldForKeys.sealing.remove(peer)
            let id = entry.message.messageId
            switch result {
            case .failure(let error)
            where error is DevicesNotYetKnown
                && endToEnd.keyWait.givesUp(heldAt: entry.heldAt, now: now, giveUpAfter: configuration.retransmit.giveUpAfter):
                release(id)?.succeed(.failed(messageId: id, .expired(after: configuration.retransmit.giveUpAfter, attempts: 0)))
            case .failure(let error) where HeldForKeys.waits(error):
                return keepWaiting(for: peer, because: error)
            case .failure(let error):
                release(id)?.succeed(.failed(messageId: id, HeldForKeys.failure(error)))
            case .success(let sealed):
                if let promise = release(id, settle: false) { sendSealed(entry.message, sealed).1.cascade(to: promise) }
            }
            sealHeld(to: peer)
        }
    }

    /// Takes held message `id` out of the queue (and, unless it is sent now, out of the outbox);
    /// its caller's promise, nil if it was already answered.
    private func release(_ id: UInt64, settle: Bool = true) -> EventLoopPromise<SendResult>? {
        guard let index = heldForKeys.entries.firstIndex(where: { $0.message.messageId == id }) else { return nil }
        let entry = heldForKeys.entries.remove(at: index)
        if !heldForKeys.holds(messagesTo: entry.message.toUser) { heldForKeys.toldWaiting.remove(entry.message.toUser) }
        if settle { settled(id) }
        return entry.promise
    }

    /// The connection is lost for good: callers waiting for held messages learn it (the
    /// messages stay in the outbox for the next client of this device, and held here in case
    /// the user connects again: `connectAgain`; their key-fetch retries stop). Returns their ids.
    func failHeldMessages() -> [UInt64] {
        for retry in heldForKeys.retries.values { retry.cancel() }
        heldForKeys.retries.removeAll()
        heldForKeys.toldWaiting.removeAll()
        for entry in heldForKeys.entries { entry.promise.succeed(.connectionLost(messageId: entry.message.messageId)) }
        return heldForKeys.entries.map(\.message.messageId)
    }
}
