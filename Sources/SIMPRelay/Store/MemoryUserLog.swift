import SIMPCore

/// One user's durable log in memory, with the rules of the Redis scripts (`UserLogScripts`,
/// docs/PROTOCOL.md §7.8): entries numbered in the order they were stored, a cursor per known
/// device (the last entry it has contiguously) and the entries it receipted beyond it; entries
/// every known device has leave the log, a full log refuses new entries, entries beyond the TTL
/// are discarded and reported unless a device received them. `known` is always the user's known devices.
struct MemoryUserLog: Sendable {
    private struct Item: Sendable {
        var id: UInt64
        var entry: InboxEntry
    }

    /// The log, in id order.
    private var items: [Item] = []
    /// dedupe key → id of the entry in `items` that has it (at most one).
    private var idsByKey: [String: UInt64] = [:]
    private var nextId: UInt64 = 1
    /// device → the last id it has contiguously (missing: 0).
    private var cursors: [String: UInt64] = [:]
    /// device → the last id before it became known, for a device that joined after others.
    private var starts: [String: UInt64] = [:]
    /// device → ids it receipted beyond its cursor.
    private var acked: [String: Set<UInt64>] = [:]

    var isEmpty: Bool { items.isEmpty }
    /// Entries in the log.
    var count: Int { items.count }

    /// `device` became known: the first device gets the whole log, a later one what is stored
    /// from now on.
    mutating func deviceBecameKnown(_ device: String, first: Bool) {
        acked[device] = nil
        cursors[device] = first ? nil : items.last?.id
        starts[device] = cursors[device]
    }

    /// Discards what expired (stored before `cutoff`), then appends `entry` unless its dedupe key
    /// is in the log or the log holds `cap` entries: entries some device has make room first
    /// (oldest first, unreported), and with none left the entry is refused (what no device has stays).
    mutating func store(_ entry: InboxEntry, cap: Int, cutoff: Int64, known: [String]) -> InboxStoreResult {
        var result = InboxStoreResult(duplicate: true)
        result.discarded = expire(before: cutoff, known: known)
        trimDelivered(known: known)
        if idsByKey[entry.dedupeKey] == nil {
            result.duplicate = false
            while items.count >= cap, let index = items.firstIndex(where: { received($0.id, known: known) }) {
                _ = discard(index, known: known)
            }
            if items.count >= cap {
                result.refused = true
            } else {
                items.append(Item(id: nextId, entry: entry))
                idsByKey[entry.dedupeKey] = nextId
                nextId += 1
            }
        }
        return result
    }

    /// What `device` has not receipted, oldest first, after the entries that expired now
    /// without reaching any device.
    mutating func load(for device: String, cutoff: Int64, known: [String]) -> [InboxEntry] {
        let expired = expire(before: cutoff, known: known).map(\.entry)
        trimDelivered(known: known)
        return expired + pending(for: device)
    }

    /// What `device` has not receipted, oldest first.
    func pending(for device: String) -> [InboxEntry] {
        let cursor = cursors[device] ?? 0, done = acked[device] ?? []
        return items.filter { $0.id > cursor && !done.contains($0.id) }.map(\.entry)
    }

    /// The entries in the log that were stored before `device` became known (never meant for it).
    func earlier(than device: String) -> [InboxEntry] {
        guard let start = starts[device] else { return [] }
        return items.filter { $0.id <= start }.map(\.entry)
    }

    /// `device` has the entry with `dedupeKey`. A device that is not known acks only while the
    /// user has none.
    mutating func ack(_ dedupeKey: String, by device: String, known: [String]) {
        guard let id = idsByKey[dedupeKey] else { return }
        let known = known.isEmpty ? [device] : known
        guard known.contains(device) else { return }
        if id > cursors[device] ?? 0 { acked[device, default: []].insert(id) }
        trimDelivered(known: known)
    }

    /// `devices` were forgotten: what the remaining ones all have leaves the log.
    mutating func forget(_ devices: [String], known: [String]) {
        for device in devices { (cursors[device], starts[device], acked[device]) = (nil, nil, nil) }
        trimDelivered(known: known)
    }

    private func received(_ id: UInt64, known: [String]) -> Bool {
        known.contains { (id > starts[$0] ?? 0 && id <= cursors[$0] ?? 0) || acked[$0]?.contains(id) == true }
    }

    /// Removes the item at `index`; returns its entry if no device received it (to report).
    private mutating func discard(_ index: Int, known: [String]) -> InboxEntry? {
        let item = items.remove(at: index)
        idsByKey[item.entry.dedupeKey] = nil
        for device in known { acked[device]?.remove(item.id) }
        return received(item.id, known: known) ? nil : item.entry
    }

    private mutating func expire(before cutoff: Int64, known: [String]) -> [DiscardedEntry] {
        var discarded: [DiscardedEntry] = []
        while let head = items.first, head.entry.storedAt < cutoff {
            if let gone = discard(0, known: known) { discarded.append(DiscardedEntry(entry: gone, reason: .expired)) }
        }
        return discarded
    }

    /// Moves each device's cursor over what it acked contiguously, and drops what every known
    /// device has; an empty log forgets the cursors (every device has everything).
    private mutating func trimDelivered(known: [String]) {
        if !known.isEmpty {
            for device in known {
                var cursor = cursors[device] ?? 0
                var next = firstIndex(above: cursor)
                while next < items.count, acked[device]?.remove(items[next].id) != nil {
                    cursor = items[next].id
                    next += 1
                }
                if cursor > 0 { cursors[device] = cursor }
            }
            let low = known.map { cursors[$0] ?? 0 }.min() ?? 0
            let delivered = firstIndex(above: low)
            for item in items[..<delivered] { idsByKey[item.entry.dedupeKey] = nil }
            items.removeFirst(delivered)
        }
        if items.isEmpty { (cursors, starts, acked) = ([:], [:], [:]) }
    }

    /// The index of the first item whose id is above `id` (`items.count` if none): a binary
    /// search, as ids grow along the log.
    private func firstIndex(above id: UInt64) -> Int {
        var (low, high) = (0, items.count)
        while low < high {
            let middle = (low + high) / 2
            if items[middle].id > id { high = middle } else { low = middle + 1 }
        }
        return low
    }
}
