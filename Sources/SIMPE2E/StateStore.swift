/// Where an `E2EDevice` persists its state: named byte strings (the names are "identity",
/// "prekeys" and "peer/" followed by the peer device's name). The client implements it over
/// files in `$SIMP_HOME` with mode 0600; everything saved is secret.
public protocol E2EStateStore: AnyObject {
    /// The bytes last saved under `name`, or nil.
    func load(_ name: String) throws -> [UInt8]?
    /// Replaces what is saved under `name`.
    func save(_ name: String, _ bytes: SecretBytes) throws
}

/// An `E2EStateStore` in memory, for tests and simulations. `snapshot` and `restore` stand in
/// for a backup and its restoration.
public final class MemoryStateStore: E2EStateStore {
    private var items: [String: [UInt8]] = [:]

    public init() {}

    public func load(_ name: String) -> [UInt8]? { items[name] }
    public func save(_ name: String, _ bytes: SecretBytes) { items[name] = bytes.bytes }

    /// Everything saved, as a backup would copy it.
    public func snapshot() -> [String: [UInt8]] { items }
    /// Replaces everything by a snapshot, as restoring a backup would.
    public func restore(_ snapshot: [String: [UInt8]]) { items = snapshot }
    /// Forgets one entry, as a lost or corrupted file would.
    public func remove(_ name: String) { items[name] = nil }
}
