import Foundation

/// The bound on `FileDownloads`' `.received/` records (`ReceivedFile`: what lets a file sent
/// again be answered done at once). Without one they would pile up forever, one per file
/// received. A record only saves a transfer, so dropping one costs at most sending its file
/// again.
public enum ReceivedRecords {
    /// Records older than this are removed: 90 days.
    public static let maxAge: TimeInterval = 90 * 24 * 3600
    /// At most this many are kept, the newest: 10,000.
    public static let maxCount = 10_000

    /// Removes from `directory` the records older than `maxAge` (by modification time) and the
    /// oldest beyond `maxCount`; returns how many were removed. Files that are not records
    /// (not `.json`) are left alone.
    @discardableResult
    public static func prune(_ directory: URL, now: Date = Date(), maxAge: TimeInterval = maxAge, maxCount: Int = maxCount) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        var records: [(url: URL, modified: Date)] = []
        for name in names where name.hasSuffix(".json") {
            let url = directory.appendingPathComponent(name)
            let modified = (try? FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate] as? Date) ?? nil
            records.append((url, modified ?? .distantPast))
        }
        records.sort { $0.modified > $1.modified }
        var removed = 0
        for (index, record) in records.enumerated() where index >= maxCount || now.timeIntervalSince(record.modified) > maxAge {
            if (try? FileManager.default.removeItem(at: record.url)) != nil { removed += 1 }
        }
        return removed
    }
}
