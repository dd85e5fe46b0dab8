import Foundation
import NIOCore
import SIMPCore
import SIMPE2E

/// Cross-signing (docs/E2E.md §3.4): a user's first device makes the user's signing key and
/// signs the list of the user's approved devices; peers pin that key on first use and encrypt
/// only to the devices its list approves (`E2EMessenger.recipients`, `DeviceListPin`). This is
/// the shell: it carries the lists between the relay (KEYS_PUBLISH, KEYS_FETCH field
/// `deviceList`) and the messenger, and tells the user what changed.
extension EndToEnd {
    /// The file holding this user's signing key, on the device that made it.
    static let userKeyName = "user-key"
    /// The file holding the last device list this device signed with the user key.
    static let ownDeviceListName = "own-device-list"

    /// Takes the device list the relay served for `peer` and tells the user what it changed.
    func takeDeviceList(_ served: [UInt8], of peer: String) throws {
        switch try messenger.takeDeviceList(served, of: peer) {
        case .userKeyChanged:
            verifiedPeers.changedSinceLastMessage.insert(peer)
            onNotice(.userKeyChanged(user: peer))
            try renewRoomKeys(with: peer)
        case .updated:
            try renewRoomKeys(with: peer) // a device approved or removed: the next post re-keys
        case .withdrawn(let reason):
            if toldOnce.shouldTell(.deviceListWithdrawn(user: peer)) { onNotice(.deviceListWithdrawn(user: peer, reason: reason)) }
        case .invalid(let reason):
            logger.warning("ignoring a device list", metadata: ["user": "\(peer)", "error": "\(reason)"])
        case .noUserKey, .pinned, .unchanged: break
        }
    }

    /// Tells the user, once per device and process, of each device of `peer` left out because
    /// `peer`'s pinned device list does not approve it.
    func tellUnapproved(of peer: String) {
        guard let unapproved = try? messenger.unapprovedDevices(of: peer) else { return }
        for device in unapproved where toldOnce.shouldTell(.unapprovedDevice(user: peer, device: device.device)) {
            onNotice(.unapprovedDevice(user: peer, device: device.device))
        }
    }

    /// This device's bundle as published (without one-time prekeys).
    var publishedBundle: [UInt8] { messenger.local.prekeys.bundle(identity: messenger.local.identity, oneTimePrekeys: []).encoded }

    /// The user's signing key, when this device holds it (the device that made it).
    func userKey() throws -> UserSigningKey? { try store.load(Self.userKeyName).map(UserSigningKey.init(secretBytes:)) }

    /// The last device list this device signed (nil: it holds no user key).
    func ownDeviceList() throws -> SignedDeviceList? { try store.load(Self.ownDeviceListName).map(SignedDeviceList.init(encoded:)) }

    /// Carries out what this user's own KEYS_FETCH answer says about the user's device list, as
    /// `OwnDeviceListCheck` decides: the device holding the user key publishes its list again
    /// when the relay lacks it (never over another key's); the user's only device, when no list
    /// approves it (`settings.makesUserKey`), makes the user key and a list of itself; a device
    /// the list does not approve is told to the user once.
    func reconcileOwnDeviceList(_ answer: SIMPMessage, via engine: ClientEngine) -> EventLoopFuture<Void> {
        do {
            let check = OwnDeviceListCheck.check(
                served: answer.deviceList, listedDevices: answer.members, own: try ownDeviceList(), device: device, identity: identity,
                makesUserKey: settings.makesUserKey && !settings.existingKeysOnly)
            for finding in check.findings { tellOwnList(finding) }
            switch check.step {
            case .none: return engine.eventLoop.makeSucceededVoidFuture()
            case .republish(let own): return publishDeviceList(own, via: engine) // the relay lacks it, or serves an older one
            case .makeUserKey: return makeUserKey(via: engine).map { _ in } // a new user key is a safety number change
            }
        } catch {
            return engine.eventLoop.makeFailedFuture(error)
        }
    }

    /// Tells the user `finding` of this user's own device list, once per process.
    private func tellOwnList(_ finding: OwnDeviceListCheck.Finding) {
        switch finding {
        case .otherDeviceNotApproved(let other):
            if toldOnce.shouldTell(.ownDeviceNotApproved(device: other)) { onNotice(.ownDeviceNotApproved(device: other, code: nil)) }
        case .userKeyReplaced:
            if toldOnce.shouldTell(.ownUserKeyReplaced) { onNotice(.userKeyChanged(user: user)) }
        case .thisDeviceNotApproved:
            if toldOnce.shouldTell(.ownDeviceNotApproved(device: device)) {
                onNotice(.ownDeviceNotApproved(device: device, code: SafetyNumber.deviceCode(user: user, identity: identity)))
            }
        }
    }

    /// Makes a new user key on this device and publishes a list of this device alone (the
    /// user's first device, or `simp devices reset` after the device holding the old key was
    /// lost): every peer that pinned another key sees a user key change.
    func makeUserKey(via engine: ClientEngine) -> EventLoopFuture<SignedDeviceList> {
        do {
            let key = UserSigningKey(using: &random)
            let list = try SignedDeviceList.signed(user: user, counter: 1, devices: [ApprovedDevice(device: device, identity: identity)], by: key)
            try store.save(Self.userKeyName, key.secretBytes)
            try store.save(Self.ownDeviceListName, SecretBytes(list.encoded))
            try store.commit()
            return publishDeviceList(list, via: engine).map { list }
        } catch {
            return engine.eventLoop.makeFailedFuture(error)
        }
    }

    /// The identity key the relay serves for this user's device `name` (its bundle's).
    func ownDeviceIdentity(_ name: String, via engine: ClientEngine) -> EventLoopFuture<IdentityKey> {
        engine.keysRequest(.keysFetch) { [self] in
            $0.toUser = user
            $0.members = [name, device] // no one-time prekey is claimed for these
        }.flatMapThrowing { [self] answer in
            guard let index = answer.members.firstIndex(of: name), index < answer.keyBundles.count else {
                throw SIMPClientError.notEncryptable("\(user) has no device \"\(name)\" with keys at the relay (it must have logged in once)")
            }
            return try KeyBundle.checked(answer.keyBundles[index]).identity
        }
    }

    /// Approves this user's device `name` (as the relay lists it now, with the identity its
    /// bundle has): signs a new list with it, counter + 1, and publishes it. Only the device
    /// holding the user key can. With `code`, only if the served identity has that device code
    /// (`SafetyNumber.deviceCode`, the code the device itself shows).
    func approveDevice(_ name: String, code: String?, via engine: ClientEngine) -> EventLoopFuture<SignedDeviceList> {
        let signer: (key: UserSigningKey, list: SignedDeviceList)
        do {
            guard let key = try userKey(), let list = try ownDeviceList() else {
                throw SIMPClientError.notEncryptable(
                    "this device (\(device)) does not hold \(user)'s user key: approve \(name) on the device that does "
                        + "(the first device of \(user), which made it)")
            }
            signer = (key, list)
        } catch {
            return engine.eventLoop.makeFailedFuture(error)
        }
        return ownDeviceIdentity(name, via: engine).flatMapThrowing { [self] identity -> SignedDeviceList in
            let served = SafetyNumber.deviceCode(user: user, identity: identity)
            if let code, !SafetyNumber.deviceCode(served, matches: code) {
                throw SIMPClientError.notEncryptable(
                    "the keys the relay serves as \(name) have the device code \(served), not \(code): they are not the device "
                        + "that showed \(code) (mistyped, or replaced at the relay); not approved")
            }
            let list = try signer.list.adding(ApprovedDevice(device: name, identity: identity), by: signer.key)
            try store.save(Self.ownDeviceListName, SecretBytes(list.encoded))
            try store.commit()
            return list
        }.flatMap { [self] list in publishDeviceList(list, via: engine).map { list } }
    }

    /// Removes this user's device `name` from the device list (a device lost, or approved by
    /// mistake): signs a new list without it, counter + 1, and publishes it; peers stop
    /// encrypting to `name` at their next fetch. Only the device holding the user key can.
    func removeDevice(_ name: String, via engine: ClientEngine) -> EventLoopFuture<SignedDeviceList> {
        do {
            guard let key = try userKey(), let own = try ownDeviceList() else {
                throw SIMPClientError.notEncryptable(
                    "this device (\(device)) does not hold \(user)'s user key: remove \(name) on the device that does")
            }
            guard name != device else {
                throw SIMPClientError.notEncryptable("\(name) holds the user key; `simp devices reset` on another device replaces it")
            }
            let list = try own.removing(name, by: key)
            try store.save(Self.ownDeviceListName, SecretBytes(list.encoded))
            try store.commit()
            return publishDeviceList(list, via: engine).map { list }
        } catch {
            return engine.eventLoop.makeFailedFuture(error)
        }
    }

    /// Publishes `list` with this device's bundle (KEYS_PUBLISH; no one-time prekeys).
    private func publishDeviceList(_ list: SignedDeviceList, via engine: ClientEngine) -> EventLoopFuture<Void> {
        let bundle = publishedBundle
        return engine.keysRequest(.keysPublish) {
            $0.keyBundles = [bundle]
            $0.deviceList = list.encoded
        }.map { _ in }
    }
}
