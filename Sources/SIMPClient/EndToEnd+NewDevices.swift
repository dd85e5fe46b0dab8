import Foundation
import NIOCore
import SIMPCore
import SIMPE2E

/// New devices, told by the relay (docs/PROTOCOL.md §4.8, "New devices"): a peer's new key
/// bundle makes the peer's device list stale, so the next message fetches it again and the new
/// device can read it; a new device of this user is told to the user
/// (`-- a new device "phone-77ab" logged in as you from 127.0.0.5`).
extension EndToEnd {
    /// A KEYS_PUBLISH notice from the relay: `notice.fromUser`'s device `notice.device` has a
    /// new key bundle.
    func keysChanged(_ notice: SIMPMessage, via engine: ClientEngine) {
        guard notice.fromUser == user else {
            forgetDevices(of: notice.fromUser)
            return engine.sealHeld(to: notice.fromUser) // messages that waited for its keys go now
        }
        guard notice.device != device else { return }
        checkOwnDevices(via: engine, loginAddress: notice.loginAddress).whenFailure { [logger] error in
            logger.debug("cannot fetch this user's devices", metadata: ["error": "\(error)"])
        }
    }

    /// Fetches this user's devices and tells the user of each one not seen before, unless
    /// none were seen before (the first run of this device: they are not news). Also makes
    /// this device one the relay tells of the user's new bundles, and keeps the user's device
    /// list (`reconcileOwnDeviceList`: made on the first device, published again when missing).
    func checkOwnDevices(via engine: ClientEngine, loginAddress: String = "") -> EventLoopFuture<Void> {
        let known: [String]?
        do { known = try store.load(Self.ownDevicesName).map { String(decoding: $0, as: UTF8.self).split(separator: "\n").map(String.init) } } catch {
            return engine.eventLoop.makeFailedFuture(error)
        }
        // No one-time prekey is claimed for the devices named. The proof of its own list is
        // checked (monitoring); a list it did not sign is told below whatever the proof.
        return fetchKeys(of: user, members: (known ?? []) + [device], via: engine).flatMapThrowing { [self] answer, _ in
            let others = answer.members.filter { $0 != device }
            for new in others where known.map({ !$0.contains(new) }) ?? false {
                onNotice(.ownNewDevice(device: new, loginAddress: loginAddress))
            }
            try store.save(Self.ownDevicesName, SecretBytes(Array(others.joined(separator: "\n").utf8)))
            return answer
        }.flatMap { [self] answer in reconcileOwnDeviceList(answer, via: engine) }
    }

    /// The file that keeps the names of this user's other devices.
    static let ownDevicesName = "own-devices"
}
