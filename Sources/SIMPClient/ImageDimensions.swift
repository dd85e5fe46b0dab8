import Foundation

/// The width and height of a PNG, JPEG or GIF image, read from its header (no image library:
/// the few bytes each format puts first). Nil for anything else, or a header cut short.
public struct ImageDimensions: Equatable, Sendable, CustomStringConvertible {
    public var format: String
    public var width: Int
    public var height: Int

    /// `640×480`.
    public var description: String { "\(width)×\(height)" }

    public init(format: String, width: Int, height: Int) {
        self.format = format
        self.width = width
        self.height = height
    }

    /// The dimensions in the first bytes of an image (256 KiB is enough for a JPEG's metadata).
    public init?(header bytes: [UInt8]) {
        if let found = Self.png(bytes) ?? Self.gif(bytes) ?? Self.jpeg(bytes) { self = found } else { return nil }
    }

    /// The dimensions of the image file at `path` (its first 256 KiB are read).
    public init?(path: String) {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let data = try? handle.read(upToCount: 256 << 10) else { return nil }
        self.init(header: Array(data))
    }

    private static func bigEndian(_ bytes: [UInt8], _ at: Int, _ count: Int) -> Int {
        bytes[at..<at + count].reduce(0) { $0 << 8 | Int($1) }
    }

    /// The signature, then the IHDR chunk: width and height, 4 bytes each, big-endian.
    private static func png(_ bytes: [UInt8]) -> ImageDimensions? {
        guard bytes.count >= 24, bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]),
            bytes[12..<16].elementsEqual("IHDR".utf8)
        else { return nil }
        return ImageDimensions(format: "PNG", width: bigEndian(bytes, 16, 4), height: bigEndian(bytes, 20, 4))
    }

    /// `GIF87a`/`GIF89a`, then the screen's width and height, 2 bytes each, little-endian.
    private static func gif(_ bytes: [UInt8]) -> ImageDimensions? {
        guard bytes.count >= 10, bytes.starts(with: Array("GIF87a".utf8)) || bytes.starts(with: Array("GIF89a".utf8)) else { return nil }
        return ImageDimensions(format: "GIF", width: Int(bytes[6]) | Int(bytes[7]) << 8, height: Int(bytes[8]) | Int(bytes[9]) << 8)
    }

    /// SOI, then segments (marker, 2-byte length) up to a start-of-frame, which holds the
    /// precision, the height and the width.
    private static func jpeg(_ bytes: [UInt8]) -> ImageDimensions? {
        guard bytes.count >= 4, bytes[0] == 0xFF, bytes[1] == 0xD8 else { return nil }
        var at = 2
        while at + 3 < bytes.count {
            guard bytes[at] == 0xFF else { return nil }
            let marker = bytes[at + 1]
            if marker == 0xFF { // fill byte
                at += 1
                continue
            }
            if marker == 0x01 || (0xD0...0xD7).contains(marker) { // no length
                at += 2
                continue
            }
            let length = bigEndian(bytes, at + 2, 2)
            let isFrame = (0xC0...0xCF).contains(marker) && ![0xC4, 0xC8, 0xCC].contains(marker)
            if isFrame {
                guard at + 9 <= bytes.count else { return nil }
                return ImageDimensions(format: "JPEG", width: bigEndian(bytes, at + 7, 2), height: bigEndian(bytes, at + 5, 2))
            }
            guard length >= 2 else { return nil }
            at += 2 + length
        }
        return nil
    }
}

/// Sizes for people.
public enum ByteCount {
    /// `532 bytes`, `12.3 kB`, `4.5 MB`, `1.2 GB` (decimal units).
    public static func text(_ bytes: UInt64) -> String {
        if bytes < 1000 { return "\(bytes) bytes" }
        let units = ["kB", "MB", "GB", "TB"]
        var value = Double(bytes) / 1000
        var unit = 0
        while value >= 999.95, unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        return String(format: "%.1f", value) + " " + units[unit]
    }
}
