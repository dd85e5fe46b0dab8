/// What this user's own KEYS_FETCH answer means for the user's device list (docs/E2E.md §3.4),
/// decided without I/O: the shell (`SIMPClient`'s `EndToEnd+DeviceLists`) fetches the answer,
/// carries out the step (publish, or make the user key) and tells the user the findings, each
/// once per process.
public struct OwnDeviceListCheck: Equatable, Sendable {
    /// What the device sends.
    public enum Step: Equatable, Sendable {
        /// Nothing.
        case none
        /// Publish this device's own signed list (`list`) again: the relay lacks it, or serves
        /// an older one signed by the same user key.
        case republish(SignedDeviceList)
        /// Make the user's signing key and publish a list of this device alone: it is the
        /// user's only device and no list approves it (the first device, or one reinstalled
        /// after every device was lost).
        case makeUserKey
    }

    /// What the user is told.
    public enum Finding: Equatable, Sendable {
        /// Another device of this user, `device`, is not in the list this device signed.
        case otherDeviceNotApproved(device: String)
        /// The relay serves a list signed by another user key under this user's name (someone
        /// published keys as this user, or another device made a key at the same moment): not
        /// published over, since two devices with keys would take turns forever.
        case userKeyReplaced
        /// The list the relay serves does not approve this device: peers who know the user key
        /// send it nothing.
        case thisDeviceNotApproved
    }

    public var step: Step
    /// In the order to tell them.
    public var findings: [Finding]

    public init(step: Step, findings: [Finding] = []) {
        self.step = step
        self.findings = findings
    }

    /// The check of an answer that serves `served` (the encoded list, empty when none) and
    /// lists `listedDevices` (this user's devices with bundles), for this `device` with
    /// `identity`; `own` is the last list this device signed (nil: it holds no user key), and
    /// `makesUserKey` whether this device may make the user key.
    public static func check(
        served: [UInt8], listedDevices: [String], own: SignedDeviceList?, device: String, identity: IdentityKey, makesUserKey: Bool
    ) -> OwnDeviceListCheck {
        let others = listedDevices.filter { $0 != device }
        let servedList = served.isEmpty ? nil : try? SignedDeviceList(encoded: served)
        if let own {
            var findings = others.filter { other in !own.devices.contains { $0.device == other } }.map { Finding.otherDeviceNotApproved(device: $0) }
            guard served != own.encoded else { return OwnDeviceListCheck(step: .none, findings: findings) }
            if let servedList, servedList.userKey != own.userKey {
                findings.append(.userKeyReplaced)
                return OwnDeviceListCheck(step: .none, findings: findings)
            }
            return OwnDeviceListCheck(step: .republish(own), findings: findings)
        }
        let approved = servedList?.approves(device: device, identity: identity) == true
        if !approved, others.isEmpty, makesUserKey { return OwnDeviceListCheck(step: .makeUserKey) }
        return OwnDeviceListCheck(step: .none, findings: !approved && servedList != nil ? [.thisDeviceNotApproved] : [])
    }
}
