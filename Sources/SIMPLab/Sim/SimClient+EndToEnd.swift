import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPE2E

/// The simulated client's end-to-end layer: the production `EndToEnd` of `SIMPClient` on the
/// client's engine (keys in the device's store in the world, in memory, kept across its processes). Each
/// process publishes its key bundle through the simulated relay once registered, and each
/// message is sealed for its receiver's devices (fetching their bundles from the relay) before
/// the engine sends it, so retransmissions carry the same ciphertext; receivers decrypt what
/// they are handed, and what they cannot is counted (`decryption_failures`).
extension SimClient {
    /// Opens the device's keys for the new process's engine.
    func startEndToEnd() {
        keysPublished = false
        sealInFlight = false
        do {
            try engine.startEndToEnd(Self.endToEndSettings, store: world.keyStore(user: user, device: device)) { [unowned self] notice in
                if case .undecryptable = notice { world.recorder.decryptionFailed() }
            }
        } catch {
            fatalError("simp-lab cannot open a simulated device's end-to-end keys: \(error)")
        }
    }

    /// The production defaults; `home` is not used, the keys being in memory.
    private static let endToEndSettings = EndToEndSettings(home: URL(fileURLWithPath: "/nonexistent"))

    /// The process registered: at its first registration it publishes its key bundle (as
    /// `SIMPClient.connect` does), and only then counts as connected and seals what waits.
    func registered() {
        guard !keysPublished else { return connected() }
        let process = engine!
        process.publishEndToEndKeys().assumeIsolated().whenComplete { [unowned self] result in
            // A failed publish (the connection dropped) is tried again at the next registration.
            guard process === engine, case .success = result, !keysPublished else { return }
            keysPublished = true
            connected()
            sealNext()
        }
    }

    private func connected() {
        hasConnected = true
        world.clientConnected(self)
    }

    /// Before the workload, a sender learns its receivers' devices, as an application does when
    /// its conversations are opened: its first messages are sealed at once, not after a round
    /// trip to the relay. `ready` is called when the fetches end (one that failed is tried
    /// again by the first message).
    func openConversations(with receivers: [String], then ready: @escaping () -> Void) {
        let process = engine!
        drive {
            let fetches = receivers.map { process.fetchEndToEndDevices(of: $0) }
            EventLoopFuture.andAllComplete(fetches, on: process.eventLoop).assumeIsolated().whenComplete { _ in ready() }
        }
    }

    /// Seals the oldest message waiting and sends it, then the next: one at a time, as an
    /// application that awaits each `SIMPClient.submit` (a message sealed while an earlier one
    /// waits for its receiver's bundles would otherwise overtake it). One that cannot be sealed fails.
    func sealNext() {
        guard keysPublished, !sealInFlight, let number = sealing.keys.min(), let (text, to) = sealing[number] else { return }
        sealInFlight = true
        let process = engine!
        process.sealEndToEnd(SIMPMessage(kind: .text, toUser: to, content: text)).assumeIsolated().whenComplete { [unowned self] result in
            guard process === engine, sealing.removeValue(forKey: number) != nil else { return }
            sealInFlight = false
            switch result {
            case .success(let sealed): send(sealed, text: text)
            case .failure: recordUnsealable(text, to: to)
            }
            sealNext()
        }
    }

    /// The process ends with messages not sealed yet: the application is told they failed.
    func abandonSealing() {
        let abandoned = sealing.sorted { $0.key < $1.key }.map(\.value)
        sealing.removeAll()
        for (text, to) in abandoned { recordUnsealable(text, to: to) }
    }

    /// A message that could not be sealed: sent, as far as the report goes, and failed at once.
    private func recordUnsealable(_ text: String, to: String) {
        sealFailures += 1
        let id = 1 << 63 | UInt64(index) << 32 | sealFailures
        world.recorder.messageSent(id: id, from: user, to: to, text: text, at: world.elapsed)
        world.recorder.messageFailed(id: id, at: world.elapsed)
        outcomeArrived()
    }
}
