import Foundation
import SIMPCore

extension FileDownloads {
    /// A name safe to create in the downloads folder: the last path component of `name` (no
    /// `/` or `\`), without control characters, `..` or leading dots (never hidden), at most
    /// 200 bytes; "file" when nothing is left.
    public static func sanitised(_ name: String) -> String {
        let last = name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        var kept = String(
            String.UnicodeScalarView(
                last.unicodeScalars.filter {
                    !$0.properties.isDefaultIgnorableCodePoint && $0.value >= 0x20 && $0.value != 0x7f && !(0x80..<0xa0).contains($0.value)
                }))
        while kept.contains("..") { kept = kept.replacingOccurrences(of: "..", with: ".") }
        while kept.hasPrefix(".") { kept.removeFirst() }
        while kept.utf8.count > 200 { kept.removeLast() }
        kept = kept.trimmingCharacters(in: .whitespaces)
        return kept.isEmpty ? "file" : kept
    }

    /// Moves `source` into `directory` as `name`, or `name (1)`, `name (2)`, … before its
    /// extension: never over an existing file.
    static func moveUnique(_ source: URL, into directory: URL, name: String) throws -> URL {
        let base = (name as NSString).deletingPathExtension
        let ext = (name as NSString).pathExtension
        for attempt in 0..<10_000 {
            let candidate = attempt == 0 ? name : "\(base.isEmpty ? name : base) (\(attempt))" + (ext.isEmpty || base.isEmpty ? "" : ".\(ext)")
            let destination = directory.appendingPathComponent(candidate)
            // link(2) fails if the name exists: no window in which another file could be replaced.
            if link(source.path, destination.path) == 0 {
                try? FileManager.default.removeItem(at: source)
                return destination
            }
            guard errno == EEXIST else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: destination.path]) }
        }
        throw CocoaError(.fileWriteFileExists)
    }

    /// SHA-256 of the file at `url`, read 1 MiB at a time.
    static func digest(of url: URL) -> [UInt8] {
        var digest = FileDigest()
        guard let handle = try? FileHandle(forReadingFrom: url) else { return [] }
        defer { try? handle.close() }
        while let data = try? handle.read(upToCount: 1 << 20), !data.isEmpty { digest.update(Array(data)) }
        return digest.finalize()
    }
}
