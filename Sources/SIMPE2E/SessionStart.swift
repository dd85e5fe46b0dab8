import Crypto

/// Starting a session with a device that may be offline (docs/E2E.md §4), X3DH-style: the
/// initiator combines its identity and a fresh ephemeral key with the responder's identity,
/// signed prekey and (when the bundle has one) one-time prekey.
extension RatchetSession {
    /// The initiator's side: verifies `bundle`, derives the session secret and takes the first
    /// DH ratchet step with the signed prekey as the responder's ratchet key. Draws the ephemeral
    /// key, then the first ratchet key, from `random`.
    /// - Parameter isRecovery: set when this device lost or distrusts an earlier session with
    ///   this peer (restored from a backup, state lost); the peer is told.
    public static func initiate(
        identity: DeviceIdentity, bundle: KeyBundle, isRecovery: Bool = false,
        using random: inout some RandomNumberGenerator
    ) throws -> RatchetSession {
        try bundle.verify()
        let ephemeral = random.agreementKey()
        let signedPrekey = bundle.signedPrekey.publicKey
        let oneTimePrekey = bundle.oneTimePrekeys.first
        var agreements = [
            try E2EKDF.agree(identity.agreementKey, signedPrekey, "signed prekey"),
            try E2EKDF.agree(ephemeral, bundle.identity.agreement, "identity key"),
            try E2EKDF.agree(ephemeral, signedPrekey, "signed prekey"),
        ]
        if let oneTimePrekey { agreements.append(try E2EKDF.agree(ephemeral, oneTimePrekey.publicKey, "one-time prekey")) }
        let encapsulated = try bundle.kemPrekey.map { prekey in (prekey.id, try prekey.encapsulate()) }
        if let encapsulated { agreements.append(encapsulated.1.sharedSecret) }
        let secret = E2EKDF.sessionSecret(agreements: agreements, initiator: identity.publicKey, responder: bundle.identity)

        let ratchetKey = random.agreementKey()
        let first = E2EKDF.rootStep(rootKey: secret, agreement: try E2EKDF.agree(ratchetKey, signedPrekey, "signed prekey"))
        let baseKey = Array(ephemeral.publicKey.rawRepresentation)
        var session = RatchetSession(
            localIdentity: identity.publicKey, remoteIdentity: bundle.identity, isInitiator: true, baseKey: baseKey,
            rootKey: SecretBytes(first.rootKey), sendingRatchetKey: SendingRatchetKey(ratchetKey))
        session.receivingRatchetKey = signedPrekey
        session.sendingChain = SecretBytes(first.chainKey)
        session.pendingStart = SessionStartFields(
            initiator: identity.publicKey, baseKey: baseKey, signedPrekeyID: bundle.signedPrekey.id,
            oneTimePrekeyID: oneTimePrekey?.id,
            kem: encapsulated.map { KEMEncapsulation(prekeyID: $0.0, ciphertext: $0.1.ciphertext) }, isRecovery: isRecovery)
        return session
    }

    /// The responder's side, from a prekey message's start fields: the same session secret, with
    /// the signed prekey as the first sending ratchet key. Decrypt the prekey message with the
    /// result, and only then consume the one-time prekey.
    public static func respond(
        identity: DeviceIdentity, prekeys: DevicePrekeys,
        start: SessionStartFields
    ) throws -> RatchetSession {
        let signedPrekey = try prekeys.signedPrekey(id: start.signedPrekeyID)
        var agreements = [
            try E2EKDF.agree(signedPrekey, start.initiator.agreement, "initiator identity key"),
            try E2EKDF.agree(identity.agreementKey, start.baseKey, "base key"),
            try E2EKDF.agree(signedPrekey, start.baseKey, "base key"),
        ]
        if let id = start.oneTimePrekeyID {
            agreements.append(try E2EKDF.agree(try prekeys.oneTimePrekey(id: id), start.baseKey, "base key"))
        }
        if let kem = start.kem { agreements.append(try prekeys.kemSharedSecret(kem)) }
        let secret = E2EKDF.sessionSecret(agreements: agreements, initiator: start.initiator, responder: identity.publicKey)
        return RatchetSession(
            localIdentity: identity.publicKey, remoteIdentity: start.initiator, isInitiator: false, baseKey: start.baseKey,
            rootKey: SecretBytes(secret), sendingRatchetKey: SendingRatchetKey(signedPrekey))
    }
}
