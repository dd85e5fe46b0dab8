import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPE2E

/// What the simulated client's application does, as `SIMPClient` does for `simp`: it opens the
/// device's end-to-end keys for each process (in the world's store, in memory, kept across the
/// device's processes), publishes the key bundle once the process is registered, and submits
/// each message through the engine's own send path (`ClientEngine.sealAndSend`), one at a time
/// in the order typed, as an application that awaits each `SIMPClient.submit`. Sealing,
/// holding a message whose receiver's keys cannot be had yet (`HeldForKeys`, `KeyWait`) and
/// decrypting are the engine's; the lab has no send path of its own.
extension SimClient {
    /// Opens the device's keys for the new process's engine; undecryptable messages are counted.
    func startEndToEnd() {
        keysPublished = false
        submitting = false
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
    /// `SIMPClient.connect` does; later logins publish again in the engine), and only then
    /// counts as connected and submits what the application typed meanwhile.
    func registered() {
        guard !keysPublished else { return connected() }
        let process = engine!
        process.publishEndToEndKeys().assumeIsolated().whenComplete { [unowned self] result in
            // A failed publish (the connection dropped) is tried again at the next registration.
            guard process === engine, case .success = result, !keysPublished else { return }
            keysPublished = true
            connected()
            submitNext()
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

    /// Submits the oldest message typed and not submitted yet, then the next once the engine
    /// has taken it (sealed and sent, or held for its receiver's keys). One the engine refuses
    /// fails.
    func submitNext() {
        guard keysPublished, !submitting, let (text, to) = typed.first else { return }
        submitting = true
        let process = processes
        engine.sealAndSend(SIMPMessage(kind: .text, toUser: to, content: text)).assumeIsolated().whenComplete { [unowned self] result in
            guard isRunning, process == processes, !typed.isEmpty else { return } // else the process ended: `abandonTyped`
            typed.removeFirst()
            submitting = false
            switch result {
            case .success(let (id, outcome)): submitted(id: id, to: to, text: text, outcome: outcome)
            case .failure: recordUnsubmitted(text, to: to)
            }
            submitNext()
        }
    }

    /// The process ends with messages typed and not submitted yet: the application is told they failed.
    func abandonTyped() {
        let abandoned = typed
        typed.removeAll()
        for (text, to) in abandoned { recordUnsubmitted(text, to: to) }
    }

    /// A message the engine did not take: sent, as far as the report goes, and failed at once.
    private func recordUnsubmitted(_ text: String, to: String) {
        unsubmitted += 1
        let id = 1 << 63 | UInt64(index) << 32 | unsubmitted
        world.recorder.messageSent(id: id, from: user, to: to, text: text, at: world.elapsed)
        world.recorder.messageFailed(id: id, at: world.elapsed)
        outcomeArrived()
    }
}

/// FNV-1a over byte strings, in the order they are added: a cheap fingerprint of what a run
/// made, for checking that a seed replays byte for byte.
struct PayloadDigest {
    private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    /// Adds `bytes`, then a separator, so ["ab", "c"] and ["a", "bc"] differ.
    mutating func add(_ bytes: [UInt8]) {
        for byte in bytes { mix(byte) }
        mix(0xff)
        mix(UInt8(truncatingIfNeeded: bytes.count))
    }

    private mutating func mix(_ byte: UInt8) {
        value = (value ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
    }
}
