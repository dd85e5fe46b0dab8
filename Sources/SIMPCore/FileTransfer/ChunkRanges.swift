/// A set of chunk indices kept as sorted, disjoint, non-adjacent half-open ranges: what a file's
/// receiver holds, what its sender knows is acknowledged, and what a FILE_ACK says
/// (docs/PROTOCOL.md §5.6).
public struct ChunkRanges: Equatable, Sendable, CustomStringConvertible {
    /// The ranges, ascending; no two touch or overlap.
    public private(set) var ranges: [Range<UInt64>] = []

    /// An empty set.
    public init() {}

    /// The union of `ranges` (in any order, overlapping or not).
    public init(_ ranges: [Range<UInt64>]) {
        for range in ranges { insert(range) }
    }

    /// How many indices the set holds.
    public var count: UInt64 { ranges.reduce(0) { $0 + UInt64($1.count) } }

    /// Whether the set holds no index.
    public var isEmpty: Bool { ranges.isEmpty }

    /// Whether `index` is in the set.
    public func contains(_ index: UInt64) -> Bool {
        guard let position = lastRange(startingAtOrBelow: index) else { return false }
        return ranges[position].contains(index)
    }

    /// Whether every index in `0..<total` is in the set.
    public func covers(_ total: UInt64) -> Bool {
        total == 0 || (ranges.first.map { $0.lowerBound == 0 && $0.upperBound >= total } ?? false)
    }

    /// The lowest index not in the set.
    public var firstMissing: UInt64 {
        guard let first = ranges.first, first.lowerBound == 0 else { return 0 }
        return first.upperBound
    }

    /// Adds one index; returns whether it was new.
    @discardableResult
    public mutating func insert(_ index: UInt64) -> Bool {
        guard !contains(index) else { return false }
        insert(index..<(index + 1))
        return true
    }

    /// Adds every index of `range`.
    public mutating func insert(_ range: Range<UInt64>) {
        guard !range.isEmpty else { return }
        // The usual case, chunks in order: `range` starts in or right after the last range (it
        // is extended in place), or beyond it (appended). Ranges before the last end before
        // its start with a gap, so `range` touches none of them.
        if let last = ranges.last, range.lowerBound >= last.lowerBound {
            if range.lowerBound > last.upperBound { return ranges.append(range) }
            if range.upperBound > last.upperBound { ranges[ranges.count - 1] = last.lowerBound..<range.upperBound }
            return
        }
        var low = range.lowerBound
        var high = range.upperBound
        // The ranges that touch or overlap `range` are contiguous in `ranges`: merge them.
        var first = ranges.count
        var last = -1
        for (position, existing) in ranges.enumerated() where existing.upperBound >= low && existing.lowerBound <= high {
            first = min(first, position)
            last = position
            low = min(low, existing.lowerBound)
            high = max(high, existing.upperBound)
        }
        if last >= first {
            ranges[first] = low..<high
            if last > first { ranges.removeSubrange((first + 1)...last) }
        } else {
            let position = ranges.firstIndex { $0.lowerBound > high } ?? ranges.count
            ranges.insert(low..<high, at: position)
        }
    }

    /// Removes and returns the lowest index (nil when empty).
    public mutating func popFirst() -> UInt64? {
        guard let first = ranges.first else { return nil }
        if first.count > 1 { ranges[0] = (first.lowerBound + 1)..<first.upperBound } else { ranges.removeFirst() }
        return first.lowerBound
    }

    /// The indices in `0..<total` that are not in the set, as ranges, ascending.
    public func missing(below total: UInt64) -> [Range<UInt64>] {
        var gaps: [Range<UInt64>] = []
        var next: UInt64 = 0
        for range in ranges {
            guard next < total else { break }
            if range.lowerBound > next { gaps.append(next..<min(range.lowerBound, total)) }
            next = max(next, range.upperBound)
        }
        if next < total { gaps.append(next..<total) }
        return gaps
    }

    /// At most `limit` ranges to report: the first (from 0, the cumulative part) and the highest
    /// others, so a sender learns both what is settled and what arrived most recently.
    public func reported(limit: Int) -> [Range<UInt64>] {
        guard ranges.count > limit, limit > 0 else { return ranges }
        return [ranges[0]] + ranges.suffix(limit - 1)
    }

    /// The wire form of a FILE_ACK's `fileRanges`: for each range, its distance from the end of
    /// the previous one (from 0 for the first) and its length.
    public var wireForm: [UInt64] {
        var values: [UInt64] = []
        var previousEnd: UInt64 = 0
        for range in ranges {
            values.append(range.lowerBound - previousEnd)
            values.append(UInt64(range.count))
            previousEnd = range.upperBound
        }
        return values
    }

    /// Ranges read from the wire form; nil if it is malformed (odd count, an empty range, a gap
    /// of 0 after the first range, or an overflow).
    public init?(wireForm values: [UInt64]) {
        guard values.count % 2 == 0 else { return nil }
        var previousEnd: UInt64 = 0
        var position = 0
        while position < values.count {
            let (start, startOverflow) = previousEnd.addingReportingOverflow(values[position])
            let (end, endOverflow) = start.addingReportingOverflow(values[position + 1])
            guard !startOverflow, !endOverflow, values[position + 1] > 0, position == 0 || values[position] > 0 else { return nil }
            ranges.append(start..<end)
            previousEnd = end
            position += 2
        }
    }

    public var description: String {
        ranges.map { $0.count == 1 ? "\($0.lowerBound)" : "\($0.lowerBound)-\($0.upperBound - 1)" }.joined(separator: ",")
    }

    private func lastRange(startingAtOrBelow index: UInt64) -> Int? {
        var low = 0
        var high = ranges.count
        while low < high {
            let middle = (low + high) / 2
            if ranges[middle].lowerBound <= index { low = middle + 1 } else { high = middle }
        }
        return low == 0 ? nil : low - 1
    }
}
