import NIOCore
import SIMPCore
import SIMPE2E

/// The engine's end-to-end steps, on its loop: keys opened at start, the bundle published once
/// registered, each message sealed once before it is sent. `SIMPClient` takes them, and so do
/// engines driven without it (simp-lab's simulated clients).
extension ClientEngine {
    /// Opens (or on first use makes) this device's keys in `store`, by default files under
    /// `settings.home` (simp-lab's simulated devices keep theirs in memory); from now on
    /// delivered messages are decrypted, and `onNotice` hears what the user would be told.
    package func startEndToEnd(
        _ settings: EndToEndSettings, store: E2EStateStore? = nil, onNotice: @escaping (EndToEndNotice) -> Void
    ) throws {
        let endToEnd = try EndToEnd(
            settings: settings, user: configuration.user, device: configuration.device, store: store, logger: configuration.logger,
            entropy: environment.entropy, wallClockMillis: environment.wallClockMillis)
        endToEnd.onNotice = onNotice
        use(endToEnd)
    }

    /// Encrypts and decrypts with `endToEnd` from now on: room posts that waited for their
    /// sender key are handed to the application through this engine (`takeLate`), and those an
    /// earlier process of this device held are handed over (or held again) now.
    func use(_ endToEnd: EndToEnd) {
        endToEnd.rooms.deliverLate = { [weak self] in self?.takeLate($0) }
        endToEnd.rooms.mayDeliverLate = { [weak self] in self?.mayTakeLate() ?? false }
        self.endToEnd = endToEnd
        // The outbox's records and the ratchet steps go into one journal: one fsync per burst.
        if let store = endToEnd.store as? EndToEndFileStore { configuration.outbox?.usingJournal(store) }
        resumeHeldPosts()
    }

    /// Publishes this device's key bundle and tops up its one-time prekeys (once registered).
    package func publishEndToEndKeys() -> EventLoopFuture<Void> {
        endToEnd?.publish(via: self) ?? eventLoop.makeSucceededVoidFuture()
    }

    /// Fetches `peer`'s devices and starts sessions with them (as the first message to `peer`
    /// would), so that messages to `peer` are sealed without waiting for the relay.
    package func fetchEndToEndDevices(of peer: String) -> EventLoopFuture<Void> {
        endToEnd?.fetchDevices(of: peer, via: self) ?? eventLoop.makeSucceededVoidFuture()
    }

    /// A delivered message goes to the application decrypted; a copy decrypted before is
    /// receipted without being handed over again. Room posts handed over while it is opened
    /// (it carried the sender key they waited for) are counted with it.
    package func take(_ message: SIMPMessage, allowance: Int?) -> Int {
        guard let endToEnd else { return onMessage(message) ? 1 : 0 }
        (lateTaken, lateAllowance) = (0, allowance)
        defer { (lateTaken, lateAllowance) = (0, nil) }
        let taken = endToEnd.open(message, via: self).map(onMessage) == true ? 1 : 0
        return taken + lateTaken
    }

    /// Where `message`, handed to the application now, came from (`MessageOrigin`).
    func origin(of message: SIMPMessage) -> MessageOrigin {
        endToEnd?.origin(of: message) ?? MessageOrigin(endToEnd: message.isEndToEnd)
    }

    /// Whether a held room post may be handed over now; one that may not (`simp listen
    /// --count` has its messages) stays held for the next process.
    func mayTakeLate() -> Bool { lateAllowance.map { lateTaken < $0 } ?? true }

    /// Hands the application a room post that waited for its sender key (docs/E2E.md §14.3);
    /// counted once by the session, with the message that carried the key (`take`) or by
    /// `resumeHeldPosts`.
    func takeLate(_ post: SIMPMessage) {
        if onMessage(post) { lateTaken += 1 }
    }

    /// Hands over (or holds again) the room posts an earlier process of this device held, and
    /// counts those the application took (`simp listen --count`).
    func resumeHeldPosts() {
        (lateTaken, lateAllowance) = (0, session.takesMessages ? configuration.deliveryLimit.map { $0 - session.messagesTaken } : 0)
        endToEnd?.resumeHeldPosts()
        session.countTaken(lateTaken)
        (lateTaken, lateAllowance) = (0, nil)
    }
}
