import NIOCore
import SIMPCore
import SIMPE2E

/// Asking a peer device for a message this device cannot decrypt, and answering such a request
/// (docs/E2E.md §7.5).
extension EndToEnd {
    /// Notes a direct message sealed by `seal` and submitted as `id`, so that it can be sent
    /// again when its receiver asks.
    func sent(_ original: SIMPMessage, sealed: SIMPMessage, id: UInt64, now: NIODeadline) {
        guard sealed.isEndToEnd else { return }
        if RelayCore.isRoomAddress(sealed.toUser) { return postSent(sealed, id: id) }
        let copies = (try? E2EEnvelope(encoded: sealed.e2ePayload))?.copies.map(\.device) ?? []
        let known = ((try? messenger.devices(of: sealed.toUser)) ?? []).map { ($0.device, $0.identity) }
        sentLog.record(id, original, recipients: ResendRecipients(copies: copies, known: known), now: now)
    }

    /// `message` (from `peer`'s `device`) could not be decrypted: asks that device for it again,
    /// on a new session when `EndToEndPolicy.startsRecoverySession` says so (at most one per
    /// peer device a minute, unless the current one is a restored copy).
    func askAgain(for message: SIMPMessage, device: String, via engine: ClientEngine) {
        let peer = message.fromUser
        let name = peer + "/" + device
        let sessionIsCopy = (try? messenger.local.sessionIsCopy(with: name)) ?? false // never sends (E2E.md §7.3)
        let startsSession = policy.startsRecoverySession(with: peer, device: device, sessionIsCopy: sessionIsCopy, now: engine.now)
        // One after the other per device: a request sealed before the new session exists would
        // go on the session that failed.
        let before = resendAsks[name] ?? engine.eventLoop.makeSucceededVoidFuture()
        let asked = before.flatMap { [self] in
            (startsSession ? bundle(of: peer, device: device, via: engine) : engine.eventLoop.makeSucceededFuture(nil))
        }.flatMapThrowing { [self] bundle -> SIMPMessage in
            let envelope = try messenger.sealResendRequest(
                for: message.messageId, to: peer, device: device, newSessionFrom: bundle, using: &random)
            return SIMPMessage(kind: .text, toUser: peer).sealedEndToEnd(envelope)
        }.map { [self] request in
            let (id, _) = engine.send(request)
            sentLog.record(id, nil, now: engine.now)
        }
        resendAsks[name] = asked.recover { _ in }
        asked.whenFailure { [self] error in
            logger.warning("cannot ask for a message again", metadata: ["from": "\(name)", "id": "\(message.messageId)", "error": "\(error)"])
            onNotice(.undecryptable(user: peer, messageId: message.messageId, reason: "\(error); asking for it again failed"))
        }
    }

    /// `peer`'s device `device` asks (`request`) for a message this device sent: it is sealed
    /// again for that device only and sent under a new id, once; the user is told either way.
    func resend(asked request: [UInt8], by peer: String, device: String, via engine: ClientEngine) {
        guard let id = try? ResendRequest(encoded: request).messageId else { return }
        let identity = try? messenger.devices(of: peer).first { $0.device == device }?.identity
        let original: SIMPMessage
        switch sentLog.answer(id, askedBy: peer, device: device, identity: identity) {
        case .sendAgain(let message): original = message
        case .refused: return onNotice(.resendRefused(user: peer, device: device, messageId: id)) // no copy then: nothing old
        case .notKept: return onNotice(.resent(user: peer, device: device, messageId: id, again: false))
        case .ignored: return // a request for a request or a sender key, or asked twice: nothing to say
        }
        do {
            var again = original
            again.messageId = 0
            again = again.sealedEndToEnd(try messenger.seal(original.endToEndPlaintext, to: peer, device: device))
            let (newId, _) = engine.send(again)
            sentLog.recordResent(newId, original, now: engine.now) // a resend is never sent again
            onNotice(.resent(user: peer, device: device, messageId: id, again: true))
        } catch {
            logger.warning("cannot send a message again", metadata: ["to": "\(peer)/\(device)", "id": "\(id)", "error": "\(error)"])
            onNotice(.resent(user: peer, device: device, messageId: id, again: false))
        }
    }

    /// Starts a new session, flagged as a recovery, with each device of `peer` whose session
    /// here is a copy (this device's state was restored from a backup: docs/E2E.md §7.3), so
    /// that nothing is sent on it. While the relay cannot be asked, the message waits
    /// (`DevicesNotYetKnown`).
    func restartCopiedSessions(with peer: String, via engine: ClientEngine) -> EventLoopFuture<Void> {
        let copied: [String]
        do { copied = try messenger.devicesWithCopiedSessions(of: peer) } catch { return engine.eventLoop.makeFailedFuture(error) }
        guard !copied.isEmpty else { return engine.eventLoop.makeSucceededVoidFuture() }
        let known = ((try? messenger.devices(of: peer)) ?? []).map(\.device).filter { !copied.contains($0) }
        return engine.keysRequest(.keysFetch) {
            $0.toUser = peer
            $0.members = known // a one-time prekey for each restarted device
        }.flatMapThrowing { [self] answer in
            for (device, bundle) in verifiedBundles(in: answer, of: peer) where copied.contains(device) {
                try messenger.startRecoverySession(with: peer, device: device, bundle: bundle, using: &random)
                onNotice(.restoredSessionReplaced(user: peer, device: device))
            }
        }.flatMapErrorThrowing { [self] error in
            if EndToEnd.isUnavailable(error) { throw DevicesNotYetKnown(retry: keyWait.retry(connected: engine.control != nil, now: engine.now)) }
            throw error
        }
    }

    /// `peer`'s device `device`'s bundle from the relay (nil when the relay lists no such device).
    private func bundle(of peer: String, device: String, via engine: ClientEngine) -> EventLoopFuture<KeyBundle?> {
        let known = ((try? messenger.devices(of: peer)) ?? []).map(\.device)
        return engine.keysRequest(.keysFetch) {
            $0.toUser = peer
            $0.members = known
        }.map { [self] answer in
            verifiedBundles(in: answer, of: peer).first { $0.device == device }?.bundle
        }
    }
}
