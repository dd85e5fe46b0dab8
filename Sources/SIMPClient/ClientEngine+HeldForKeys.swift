import NIOCore
import SIMPCore

/// The shell of `HeldForKeysQueue` (the session's `heldForKeys`, which decides): the callers
/// waiting for held messages' outcomes, one timer per receiver at the retry the queue plans,
/// and how a seal's error reads to the queue and to the user.
final class HeldForKeys {
    /// The callers waiting for each held message's outcome, by id.
    fileprivate var promises: [UInt64: EventLoopPromise<SendResult>] = [:]
    /// The timer of each receiver's next try.
    fileprivate var retries: [String: Scheduled<Void>] = [:]

    /// What `error` from `EndToEnd.seal` means for a held message: it waits (and until when),
    /// or (nil) it fails.
    fileprivate static func waiting(_ error: Error) -> HeldForKeysQueue.Waiting? {
        switch error {
        case let error as DevicesNotYetKnown: .forRelay(retry: error.retry)
        case let error as AwaitingFirstKeys: .forFirstKeys(recheck: error.recheck)
        default: nil
        }
    }

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
    /// A message that cannot be sealed yet is held (`HeldForKeysQueue`). Answers once the message
    /// is durable in the outbox (ClientEngine+Outbox), so that what the user sees as sent is kept.
    package func sealAndSend(_ message: SIMPMessage) -> EventLoopFuture<(UInt64, EventLoopFuture<SendResult>)> {
        guard let endToEnd else { return whenKept(send(message)) }
        if session.heldForKeys.holds(messagesTo: message.toUser) { return whenKept(hold(message)) }
        return endToEnd.seal(message, via: self).map { [self] in sendSealed(message, $0) }.flatMapErrorThrowing { [self] error in
            guard let waiting = HeldForKeys.waiting(error) else { throw error }
            let held = hold(message)
            scheduleRetry(session.heldForKeys.keepWaiting(for: message.toUser, waiting))
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
        session.heldForKeys.hold(message, now: now)
        heldForKeys.promises[message.messageId] = promise
        saveInOutbox(message, id: message.messageId)
        logger.info("holding a message until its receiver's keys can be had", metadata: ["id": "\(message.messageId)"])
        return (message.messageId, promise.futureResult)
    }

    /// Carries out the queue's retry plan: the user told once that messages wait for a first
    /// login, and the receiver's timer set (none: the next login tries again).
    private func scheduleRetry(_ retry: HeldForKeysQueue.Retry) {
        if retry.tellWaitingForFirstLogin { endToEnd?.onNotice(.waitingForFirstLogin(user: retry.peer)) }
        heldForKeys.retries.removeValue(forKey: retry.peer)?.cancel()
        guard let next = retry.at else { return }
        heldForKeys.retries[retry.peer] = schedule(at: next) { [self] in
            heldForKeys.retries[retry.peer] = nil
            sealHeld(to: retry.peer)
        }
    }

    /// Registered again: seals and sends the held messages of every receiver, oldest first.
    func sealHeldMessages() {
        for peer in session.heldForKeys.peers { sealHeld(to: peer) }
    }

    /// Seals and sends the held messages to `peer`, oldest first, each after the one before it
    /// was submitted (now: the relay told of `peer`'s new keys, or it is time to try again), as
    /// the queue decides (`HeldForKeysQueue.sealFinished`).
    func sealHeld(to peer: String) {
        guard let endToEnd, let entry = session.heldForKeys.startSealing(to: peer, connected: control != nil) else { return }
        heldForKeys.retries.removeValue(forKey: peer)?.cancel()
        endToEnd.seal(entry.message, via: self).whenComplete { [self] result in
            let sealResult: HeldForKeysQueue.SealResult
            switch result {
            case .success: sealResult = .sealed
            case .failure(let error): sealResult = HeldForKeys.waiting(error).map { .waiting($0) } ?? .cannotSeal
            }
            switch session.heldForKeys.sealFinished(entry, sealResult, now: now) {
            case .wait(let retry):
                return scheduleRetry(retry)
            case .giveUp(let id, let after):
                release(id)?.succeed(.failed(messageId: id, .expired(after: after, attempts: 0)))
            case .fail(let id):
                if case .failure(let error) = result { release(id)?.succeed(.failed(messageId: id, HeldForKeys.failure(error))) }
            case .send(let id):
                let promise = heldForKeys.promises.removeValue(forKey: id)
                if case .success(let sealed) = result, let promise { sendSealed(entry.message, sealed).1.cascade(to: promise) }
            case .gone:
                break
            }
            sealHeld(to: peer)
        }
    }

    /// Held message `id` left the queue with its outcome: it leaves the outbox; its caller's
    /// promise, nil if it was already answered.
    private func release(_ id: UInt64) -> EventLoopPromise<SendResult>? {
        settled(id)
        return heldForKeys.promises.removeValue(forKey: id)
    }

    /// The connection is lost for good: callers waiting for held messages learn it (the
    /// messages stay in the outbox for the next client of this device, and held here in case
    /// the user connects again: `connectAgain`; their key-fetch retries stop). Returns their ids.
    func failHeldMessages() -> [UInt64] {
        for retry in heldForKeys.retries.values { retry.cancel() }
        heldForKeys.retries.removeAll()
        let ids = session.heldForKeys.connectionLostForGood()
        for id in ids { heldForKeys.promises[id]?.succeed(.connectionLost(messageId: id)) }
        return ids
    }
}
