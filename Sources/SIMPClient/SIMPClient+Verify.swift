/// Marking a peer verified (docs/E2E.md §10).
extension SIMPClient {
    /// Marks `user` verified with the devices this device knows now (after the user compared
    /// the safety numbers of `safetyNumbers(with:)`): a device of `user` that is new or has
    /// another key later is told (`EndToEndNotice.verifiedKeyChanged`). Returns how many devices
    /// were marked (0: none known; end to end off).
    public func markVerified(_ user: String) async throws -> Int {
        try await onEngine(now: { engine in try engine.endToEnd?.markVerified(user) ?? 0 })
    }
}

extension SIMPClient {
    /// Accepts `user`'s changed keys without comparing safety numbers: `user` is no longer
    /// verified, and messages to `user` (refused while a verified key had changed) go again.
    /// Returns whether `user` was verified.
    public func acceptKeyChange(of user: String) async throws -> Bool {
        try await onEngine(now: { engine in try engine.endToEnd?.acceptKeyChange(of: user) ?? false })
    }
}
