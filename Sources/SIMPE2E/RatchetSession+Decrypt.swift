/// Receiving: skipped keys, duplicates, the DH ratchet step (docs/E2E.md §5).
extension RatchetSession {
    /// Decrypts `message`. Works on a copy and keeps it only when the AEAD verifies, so a
    /// forged, altered, duplicated or too-far-ahead message leaves the session as it was.
    /// - Parameters:
    ///   - now: the caller's clock in milliseconds (skipped keys older than the lifetime go).
    ///   - random: draws the next sending ratchet key when the peer's ratchet key changed.
    public mutating func decrypt(
        _ message: PairwiseMessage, now: UInt64, limits: E2ELimits = .standard,
        using random: inout some RandomNumberGenerator
    ) throws -> [UInt8] {
        skipped.forgetExpired(now: now, limits: limits)
        var next = self
        let plaintext = try next.advanceAndOpen(message, now: now, limits: limits, using: &random)
        next.pendingStart = nil
        self = next
        return plaintext
    }

    private mutating func advanceAndOpen(
        _ message: PairwiseMessage, now: UInt64, limits: E2ELimits,
        using random: inout some RandomNumberGenerator
    ) throws -> [UInt8] {
        let header = message.header
        if let kept = skipped.take(chain: header.ratchetKey, number: header.number) {
            return try open(message, messageKey: kept.bytes)
        }
        if header.ratchetKey == receivingRatchetKey {
            guard header.number >= receivingCount else { throw E2EError.duplicate }
        } else {
            guard !retiredReceivingKeys.contains(header.ratchetKey) else { throw E2EError.duplicate }
            try skip(until: header.previousChainLength, now: now, limits: limits)
            try ratchetStep(to: header.ratchetKey, limits: limits, using: &random)
        }
        try skip(until: header.number, now: now, limits: limits)
        let messageKey = advanceReceivingChain()
        return try open(message, messageKey: messageKey)
    }

    private func open(_ message: PairwiseMessage, messageKey: [UInt8]) throws -> [UInt8] {
        try E2ECipher.open(
            message.ciphertext, messageKey: messageKey, info: E2EKDF.messageInfo,
            associatedData: sessionAssociatedData + message.authenticatedPrefix)
    }

    /// KDF_CK on the receiving chain: returns the message key for `receivingCount`.
    private mutating func advanceReceivingChain() -> [UInt8] {
        let step = E2EKDF.chainStep(receivingChain!.bytes)
        receivingChain = SecretBytes(step.chainKey)
        receivingCount += 1
        return step.messageKey
    }

    /// Keeps the message keys of the current receiving chain up to (not including) `number`.
    private mutating func skip(until number: UInt32, now: UInt64, limits: E2ELimits) throws {
        guard receivingChain != nil, let chain = receivingRatchetKey, number > receivingCount else { return }
        guard number - receivingCount <= limits.maxSkipPerChain else {
            throw E2EError.tooManySkipped(requested: number - receivingCount, limit: limits.maxSkipPerChain)
        }
        while receivingCount < number {
            let index = receivingCount
            let messageKey = advanceReceivingChain()
            // Only the newest `maxSkippedKeys` could stay: older ones are not kept at all.
            guard Int(number - index) <= limits.maxSkippedKeys else { continue }
            skipped.insert(.init(chain: chain, number: index, messageKey: SecretBytes(messageKey), storedAt: now), limits: limits)
        }
    }

    /// The DH ratchet step: a new receiving chain from the peer's new ratchet key, then a new
    /// sending ratchet key pair and sending chain.
    private mutating func ratchetStep(
        to remoteKey: [UInt8], limits: E2ELimits,
        using random: inout some RandomNumberGenerator
    ) throws {
        if let old = receivingRatchetKey {
            retiredReceivingKeys.append(old)
            if retiredReceivingKeys.count > limits.retiredRatchetKeys { retiredReceivingKeys.removeFirst() }
        }
        let receiving = E2EKDF.rootStep(
            rootKey: rootKey.bytes, agreement: try E2EKDF.agree(try ratchetPrivateKey(), remoteKey, "ratchet key"))
        let newKey = random.agreementKey()
        let sending = E2EKDF.rootStep(
            rootKey: receiving.rootKey, agreement: try E2EKDF.agree(newKey, remoteKey, "ratchet key"))
        receivingRatchetKey = remoteKey
        receivingChain = SecretBytes(receiving.chainKey)
        receivingCount = 0
        previousSendingCount = sendingCount
        sendingCount = 0
        sendingRatchetKey = SendingRatchetKey(newKey)
        sendingChain = SecretBytes(sending.chainKey)
        rootKey = SecretBytes(sending.rootKey)
    }
}
