import NIOCore
import SIMPCore

/// The messages of one burst of submissions, waiting for the outbox's sync (docs/E2E.md §15:
/// a message is accepted, and transmitted, only once it is durable in the outbox).
struct OutboxBurst {
    /// The session's output for each message submitted in this burst, carried out after the sync.
    var outputs: [ClientSession.Output] = []
    /// Saved in the outbox since its last sync.
    var unsynced: [UInt64: SIMPMessage] = [:]
    /// Completed once this burst's messages are durable (or kept in memory): what submitted
    /// them waits for it.
    var done: EventLoopPromise<Void>?
}

/// The outbox's group commit: the messages submitted in one turn of the event loop are saved
/// one by one (`Outbox.save`, no waiting for the disk), made durable with one sync at the end of
/// the turn, and only then transmitted and reported as submitted. What the outbox cannot take
/// (a full disk) is kept in memory, still sent and resent, and written to the outbox when it
/// can, as the session's `OutboxKeeping` decides (when to try again, when to tell the user).
extension ClientEngine {
    /// Keeps `message` (as `id`) in the outbox until its outcome is known (durable at the end of
    /// this turn); without an outbox, or when it cannot be written, in memory (`keptInMemoryOnly`).
    func saveInOutbox(_ message: SIMPMessage, id: UInt64) {
        var message = message
        message.messageId = id
        message.fromUser = configuration.user
        guard let outbox = configuration.outbox, session.outboxKeeping.writesToOutbox else {
            return session.outboxKeeping.keepInMemory(message) // with a failed outbox: written with the others when it works again
        }
        do {
            try outbox.save(message)
            outboxBurst.unsynced[id] = message
            startBurst()
        } catch {
            session.outboxKeeping.keepInMemory(message)
            outboxFailed(error)
        }
    }

    /// Carries out `output` of a message just submitted once the outbox holds it (at the end of
    /// this turn), at once when nothing waits for the outbox.
    func carryOutWhenKept(_ output: ClientSession.Output) {
        guard outboxBurst.done != nil else { return carryOut(output) }
        outboxBurst.outputs.append(output)
    }

    /// `value` once this turn's messages are in the outbox: what a submission answers.
    func whenKept<Value: Sendable>(_ value: Value) -> EventLoopFuture<Value> {
        guard let done = outboxBurst.done else { return eventLoop.makeSucceededFuture(value) }
        return done.futureResult.map { value }
    }

    /// The outcome of message `id` is known: it leaves the outbox (or memory).
    func settled(_ id: UInt64) {
        configuration.outbox?.remove(id)
        session.outboxKeeping.settled(id)
        outboxBurst.unsynced.removeValue(forKey: id)
    }

    private func startBurst() {
        guard outboxBurst.done == nil else { return }
        outboxBurst.done = eventLoop.makePromise()
        eventLoop.execute { self.endBurst() }
    }

    /// The end of the turn: one sync for the burst, then its messages leave.
    private func endBurst() {
        let outputs = outboxBurst.outputs, done = outboxBurst.done
        (outboxBurst.outputs, outboxBurst.done) = ([], nil)
        syncOutbox()
        outputs.forEach(carryOut)
        done?.succeed()
    }

    private func syncOutbox() {
        guard let outbox = configuration.outbox, !outboxBurst.unsynced.isEmpty else { return }
        do {
            try outbox.sync()
            outboxBurst.unsynced.removeAll()
        } catch {
            for message in outboxBurst.unsynced.values { session.outboxKeeping.keepInMemory(message) }
            outboxBurst.unsynced.removeAll()
            outboxFailed(error)
        }
    }

    /// Says once that the outbox cannot be written, and tries again later (`OutboxKeeping.writeFailed`).
    private func outboxFailed(_ error: Error) {
        let failed = session.outboxKeeping.writeFailed("\(error)", now: now)
        if failed.tellUser {
            logger.warning(
                """
                the outbox cannot be written: messages are kept in memory (still sent and resent while simp runs) \
                and written to the outbox when it can be; those not delivered if simp exits before are lost, and simp says which
                """, metadata: ["error": "\(error)"])
        }
        guard let retryAt = failed.retryAt else { return }
        schedule(at: retryAt) { [self] in writeKeptInMemory() }
    }

    /// Writes the messages kept in memory since the outbox failed into it (one sync).
    private func writeKeptInMemory() {
        guard let outbox = configuration.outbox, let kept = session.outboxKeeping.retryDue() else { return }
        do {
            for message in kept { try outbox.save(message) }
            try outbox.sync()
        } catch {
            return outboxFailed(error)
        }
        session.outboxKeeping.rewritten(kept)
        logger.warning("the outbox can be written again: \(kept.count) message(s) kept in memory are in it now")
    }
}
