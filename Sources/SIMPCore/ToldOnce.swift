/// What the client told its user once about end-to-end keys, device lists and the key
/// directory (docs/E2E.md §3.4, §10, §18), so that each such notice is said once per process
/// however often the relay's answers repeat it, sans-I/O: the shell asks `shouldTell` before
/// each notice. Each subject is its own case, so one kind of notice never silences another.
public struct ToldOnce: Sendable, Equatable {
    /// What a notice is about.
    public enum Subject: Hashable, Sendable {
        /// `user`'s `device` published keys no one can use.
        case unusableKeys(user: String, device: String)
        /// The relay's answer for `user` had no room for some devices' keys.
        case devicesLeftOut(user: String)
        /// Member `user` of `room` has no usable keys: it cannot read the posts.
        case noUsableKeys(user: String, room: String)
        /// The relay serves no valid device list for `user`, whose user key is pinned.
        case deviceListWithdrawn(user: String)
        /// `user`'s pinned device list does not approve `user`'s `device`.
        case unapprovedDevice(user: String, device: String)
        /// This user's device list does not approve this user's `device` (this one or another).
        case ownDeviceNotApproved(device: String)
        /// The relay serves a device list of another user key under this user's name.
        case ownUserKeyReplaced
        /// The relay's key directory proof for `user`'s device list was refused for `problem`.
        case directoryRefused(user: String, problem: String)
        /// The relay shows `user` and this user different key directories.
        case directoryForked(user: String)
        /// Verified `user` has a device or key not verified (said again after `forget`: the
        /// user verified or accepted it since).
        case verificationLapsed(user: String)
    }

    private var told: Set<Subject> = []

    public init() {}

    /// Whether to tell `subject` now: the first time in this process only.
    public mutating func shouldTell(_ subject: Subject) -> Bool {
        told.insert(subject).inserted
    }

    /// Whether the user was told `subject`.
    public func wasTold(_ subject: Subject) -> Bool {
        told.contains(subject)
    }

    /// `subject` may be told again (what it said was settled).
    public mutating func forget(_ subject: Subject) {
        told.remove(subject)
    }
}
