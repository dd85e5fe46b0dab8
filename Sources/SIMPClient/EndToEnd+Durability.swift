import SIMPCore
import SIMPE2E

/// What of a client session's output may leave while this device's end-to-end state is not
/// durable (docs/E2E.md §15), sans-I/O: the shell commits the store before an output that
/// needs it leaves, and tells this gate how that went.
///
/// - A receipt tells the sender (and the relay, which then forgets its copy) that this device
///   has the message: it leaves only once the plaintext and the ratchet step that opened it
///   are stored. While the store cannot be written, receipts are held back: the sender
///   retransmits (or the relay keeps the message in the inbox), and the retransmission's
///   receipt leaves once the state could be written.
/// - A sealed message leaves only once the ratchet step that sealed it is stored (else a
///   restarted device would seal the next message with the same key): held back too, and
///   sent by the session's retransmission.
///
/// The user is told once when writing starts failing and once when it works again.
struct DurabilityGate: Equatable {
    /// Why the store could not be written at the last commit (nil: it could).
    private(set) var failure: String?

    /// Whether `output` holds something that may leave only once the store is committed: a
    /// receipt, or a message sealed end to end.
    static func needsCommit(_ output: ClientSession.Output) -> Bool {
        output.controlFrames.contains(where: mustWait) || output.datagrams.contains(where: mustWait)
    }

    private static func mustWait(_ message: SIMPMessage) -> Bool {
        message.kind == .receipt || message.isEndToEnd
    }

    /// The commit before `output` left succeeded (`error` nil) or failed. After a failure the
    /// receipts and sealed messages are taken out of `output`. Returns what to tell the user,
    /// if anything.
    mutating func committed(_ error: Error?, output: inout ClientSession.Output) -> EndToEndNotice? {
        guard let error else {
            defer { failure = nil }
            return failure == nil ? nil : .stateWritableAgain
        }
        output.controlFrames.removeAll(where: Self.mustWait)
        output.datagrams.removeAll(where: Self.mustWait)
        defer { failure = "\(error)" }
        return failure == nil ? .stateUnwritable(reason: "\(error)") : nil
    }
}

extension EndToEnd {
    /// Before `output` leaves: when it holds a receipt or a sealed message and the store has
    /// changes not yet written, writes them (one commit for all of them: for a burst of
    /// messages received, with the receipts batched at its end, one write); on a failure what
    /// must wait is taken out of `output` (`DurabilityGate`).
    func commitBeforeWriting(_ output: inout ClientSession.Output) {
        guard stateWaits, DurabilityGate.needsCommit(output) else { return }
        var failure: Error?
        do { try store.commit() } catch { failure = error }
        guard let notice = durability.committed(failure, output: &output) else { return }
        if case .stateUnwritable = notice {
            logger.warning("\(notice)")
        } else {
            logger.notice("\(notice)")
        }
        onNotice(notice)
    }

    /// Writes what the store holds unwritten now (before publishing one-time prekeys whose
    /// private halves it holds). Only the outbox's records waiting (their commit failed: the
    /// outbox keeps those messages in memory meanwhile) hold nothing up.
    func commit() throws {
        guard stateWaits else { return }
        try store.commit()
    }

    /// Whether end-to-end state waits to be written: what receipts, sealed messages and
    /// key requests wait for (the outbox's records in the same journal do not).
    private var stateWaits: Bool { (store as? EndToEndFileStore)?.hasUncommittedState ?? store.hasUncommittedChanges }

    /// The client closes: the sending keys reserved ahead and not used are given back (the
    /// sessions written as they are, docs/E2E.md §15), and everything is written.
    func commitAtClose() throws {
        try messenger.releaseReservedKeys()
        try store.commit()
    }
}
