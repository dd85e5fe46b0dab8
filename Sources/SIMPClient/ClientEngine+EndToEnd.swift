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
            settings: settings, user: configuration.user, device: configuration.device, store: store, logger: configuration.logger)
        endToEnd.onNotice = onNotice
        self.endToEnd = endToEnd
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

    /// `message` sealed for its receiver's devices (fetching their bundles when needed), ready
    /// for `send`; unchanged when end-to-end encryption is off.
    package func sealEndToEnd(_ message: SIMPMessage) -> EventLoopFuture<SIMPMessage> {
        endToEnd?.seal(message, via: self) ?? eventLoop.makeSucceededFuture(message)
    }
}

extension ClientEngine {
    /// How long a KEYS_PUBLISH or KEYS_FETCH waits for the relay's answer before it fails
    /// (`SIMPClientError.timedOut`): a fetch is then asked again (`KeyWait`), not the message failed.
    static let keyAnswerTimeout: TimeAmount = .seconds(10)
}
