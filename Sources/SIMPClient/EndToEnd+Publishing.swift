import Foundation
import NIOCore
import SIMPCore
import SIMPE2E

/// This device's entry in the relay's key directory, kept healthy (docs/PROTOCOL.md §4.8,
/// "Publishing"): the bundle is published at every login and whenever the relay asks (it found
/// none of this user's bundles, or few of this device's one-time prekeys left), one-time
/// prekeys are topped up and the signed prekey is rotated on schedule (`KeyUpkeep` decides).
/// A relay whose store lost the bundle (Redis restarted empty, a failover) thus has it again
/// as soon as someone asks for it, without this device restarting.
extension EndToEnd {
    /// What `KeyUpkeep` decides with, from the settings.
    var keyUpkeep: KeyUpkeep { KeyUpkeep(oneTimePrekeys: settings.oneTimePrekeys) }

    /// Publishes this device's bundle (rotating its signed prekey first when due), then tops up
    /// its one-time prekeys when fewer than half are left, then looks for new devices of this
    /// user (`checkOwnDevices`).
    func publish(via engine: ClientEngine) -> EventLoopFuture<Void> {
        do { try rotateSignedPrekeyIfDue(now: UInt64(clamping: engine.environment.wallClockMillis())) } catch {
            return engine.eventLoop.makeFailedFuture(error)
        }
        let bundle = messenger.local.prekeys.bundle(identity: messenger.local.identity, oneTimePrekeys: []).encoded
        publishing = true
        return engine.keysRequest(.keysPublish) { $0.keyBundles = [bundle] }.flatMap { [self] answer in
            let count = keyUpkeep.prekeysToAdd(left: Int(answer.prekeysLeft))
            guard count > 0 else { return engine.eventLoop.makeSucceededVoidFuture() }
            do {
                let fresh = try messenger.publishPrekeys(count, using: &random)
                return engine.keysRequest(.keysPublish) {
                    $0.keyBundles = [bundle]
                    $0.oneTimePrekeys = fresh.map(\.encoded)
                }.map { _ in }
            } catch {
                return engine.eventLoop.makeFailedFuture(error)
            }
        }.always { [self] result in
            publishing = false
            if case .success = result { hasPublished = true }
        }.flatMapErrorThrowing { [self] error in
            if case SIMPClientError.rejected(.badRequest, _) = error { policy.relayKeepsNoKeys() }
            throw error
        }.flatMap { [self] in
            checkOwnDevices(via: engine).recover { [logger] error in
                logger.debug("cannot fetch this user's devices", metadata: ["error": "\(error)"])
            }
        }
    }

    /// The engine registered again (a reconnect, possibly to another relay): the bundle is
    /// published again, in case that relay's store does not have it. The first login's publish
    /// is the caller's (`SIMPClient.connect`).
    func loggedInAgain(via engine: ClientEngine) {
        guard hasPublished else { return }
        publishAgain(via: engine, because: "logged in again")
    }

    /// A KEYS_FETCH notice from the relay (`messageId` 0): a fetch found none of this user's
    /// bundles (`device` empty), or this device's one-time prekeys run low (`device` this one).
    func askedToPublish(_ notice: SIMPMessage, via engine: ClientEngine) {
        guard notice.toUser == user, notice.device.isEmpty || notice.device == device else { return }
        publishAgain(via: engine, because: notice.device.isEmpty ? "the relay has no bundle of this user" : "few one-time prekeys left")
    }

    private func publishAgain(via engine: ClientEngine, because reason: String) {
        guard relaySupportsKeys, !publishing, !settings.existingKeysOnly else { return }
        logger.debug("publishing this device's key bundle again", metadata: ["why": "\(reason)"])
        publish(via: engine).whenFailure { [logger] error in
            logger.warning("cannot publish this device's key bundle again", metadata: ["why": "\(reason)", "error": "\(error)"])
        }
    }

    /// Rotates the signed prekey when `KeyUpkeep` says it is due; records when the current one
    /// was made (a device made before this was kept starts its period now).
    private func rotateSignedPrekeyIfDue(now: UInt64) throws {
        let madeAt = try store.load(Self.signedPrekeyMadeName).flatMap { bytes in
            UInt64(String(decoding: bytes, as: UTF8.self))
        }
        if madeAt != nil, !keyUpkeep.rotatesSignedPrekey(madeAt: madeAt, now: now) { return }
        if madeAt != nil { try messenger.rotateSignedPrekey(using: &random) }
        try store.save(Self.signedPrekeyMadeName, SecretBytes(Array(String(now).utf8)))
    }

    /// The file that keeps when the current signed prekey was made (wall-clock milliseconds).
    static let signedPrekeyMadeName = "signed-prekey-made"
}
