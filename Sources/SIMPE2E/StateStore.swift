/// Where an `E2EDevice` persists its state: named byte strings (the names are "identity",
/// "prekeys" and "peer/" followed by the peer device's name). The client implements it over
/// files in `$SIMP_HOME` with mode 0600; everything saved is secret.
public protocol E2EStateStore: AnyObject {
    /// The bytes last saved under `name`, or nil.
    func load(_ name: String) throws -> [UInt8]?
    /// Replaces what is saved under `name`.
    func save(_ name: String, _ bytes: SecretBytes) throws
    /// Whether what is saved under `name` is a copy of what this store wrote (restored from a
    /// backup, or copied from another machine) rather than what it wrote itself: a session that
    /// is a copy must not send, as its chains may have sent since (docs/E2E.md §7.3).
    func isCopy(_ name: String) throws -> Bool
    /// Makes everything saved since the last commit durable, all of it or none of it (one
    /// write, docs/E2E.md §15); on a failure (a full disk) it stays to be committed again. A
    /// store that writes at each `save` has nothing left to do.
    func commit() throws
    /// Whether something saved waits for `commit`.
    var hasUncommittedChanges: Bool { get }
}

extension E2EStateStore {
    /// A store that cannot tell says no copy.
    public func isCopy(_ name: String) throws -> Bool { false }
    /// A store that writes at each save.
    public func commit() throws {}
    public var hasUncommittedChanges: Bool { false }
}

/// An `E2EStateStore` in memory, for tests and simulations. `snapshot` and `restore` stand in
/// for a backup and its restoration.
public final class MemoryStateStore: E2EStateStore {
    private var items: [String: [UInt8]] = [:]
    private var copies: Set<String> = []

    public init() {}

    public func load(_ name: String) -> [UInt8]? { items[name] }
    public func save(_ name: String, _ bytes: SecretBytes) {
        items[name] = bytes.bytes
        copies.remove(name)
    }
    public func isCopy(_ name: String) -> Bool { copies.contains(name) }

    /// Everything saved, as a backup would copy it.
    public func snapshot() -> [String: [UInt8]] { items }
    /// Replaces everything by a snapshot, as restoring a backup would: `asCopies` like a
    /// restore the store notices (files copied back), else like one it cannot tell (a disk image).
    public func restore(_ snapshot: [String: [UInt8]], asCopies: Bool = false) {
        items = snapshot
        copies = asCopies ? Set(snapshot.keys) : []
    }
    /// Forgets one entry, as a lost or corrupted file would.
    public func remove(_ name: String) { items[name] = nil }
}
