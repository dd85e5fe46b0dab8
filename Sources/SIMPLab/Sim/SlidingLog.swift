/// An append-only list addressed by position (`start..<end`) whose oldest entries can be
/// dropped: a position keeps naming the same entry while the front goes, and the space of
/// dropped entries is given back in batches (each entry is moved O(1) times on average).
struct SlidingLog<Element> {
    private var storage: [Element] = []
    /// The position of `storage[0]`.
    private var storageStart = 0
    /// The first position not dropped.
    private(set) var start = 0
    /// The position the next entry gets.
    var end: Int { storageStart + storage.count }

    /// Appends `element`; returns its position.
    @discardableResult
    mutating func append(_ element: Element) -> Int {
        storage.append(element)
        return end - 1
    }

    subscript(position: Int) -> Element {
        precondition(position >= start && position < end, "position \(position) outside \(start)..<\(end)")
        return storage[position - storageStart]
    }

    /// Drops the entries before `position` (nothing if they are gone already).
    mutating func dropFirst(upTo position: Int) {
        start = min(max(start, position), end)
        let dropped = start - storageStart
        guard dropped >= 1_024, dropped * 2 >= storage.count else { return }
        storage.removeFirst(dropped)
        storageStart = start
    }
}
