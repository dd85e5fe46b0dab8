/// Turns bytes read from a raw-mode terminal into `Key`s. Sequences and UTF-8 characters may
/// be split across reads: incomplete input is kept until the next `feed`.
///
/// A lone ESC is ambiguous (Escape key, or the start of a sequence still in flight); the
/// caller calls `flush()` when no more bytes arrived shortly after one.
public struct KeyDecoder: Sendable {
    private var pending: [UInt8] = []

    public init() {}

    /// Whether bytes are held back waiting for the rest of a sequence or character.
    public var hasPending: Bool { !pending.isEmpty }

    /// Decodes as many keys as the bytes so far allow.
    public mutating func feed<Bytes: Sequence>(_ bytes: Bytes) -> [Key] where Bytes.Element == UInt8 {
        pending.append(contentsOf: bytes)
        var keys: [Key] = []
        var index = 0
        while index < pending.count {
            guard let (key, length) = Self.decodeOne(pending, at: index) else { break }
            index += length
            if case .text(let text) = key, case .text(let previous)? = keys.last {
                keys[keys.count - 1] = .text(previous + text)
            } else {
                keys.append(key)
            }
        }
        pending.removeFirst(index)
        return keys
    }

    /// Gives up waiting for the rest of a held-back sequence: a leading ESC becomes `.escape`
    /// (the bytes after it are decoded on their own), an incomplete character is dropped.
    public mutating func flush() -> [Key] {
        guard let first = pending.first else { return [] }
        let rest = pending.dropFirst()
        pending = []
        guard first == 0x1B else { return [.unknown] }
        var keys: [Key] = [.escape] + feed(rest)
        if !pending.isEmpty { keys.append(.unknown) }
        pending = []
        return keys
    }

    /// One key starting at `index` and how many bytes it took, or nil if more bytes are needed.
    static func decodeOne(_ bytes: [UInt8], at index: Int) -> (Key, Int)? {
        let byte = bytes[index]
        switch byte {
        case 0x1B: return decodeEscape(bytes, at: index)
        case 0x0D, 0x0A: return (.enter, 1)
        case 0x7F, 0x08: return (.backspace, 1)
        case 0x09: return (.tab, 1)
        case 0x01...0x1A: return (.control(Character(Unicode.Scalar(byte + 0x60))), 1)
        case 0x00, 0x1C...0x1F: return (.unknown, 1)
        default: return decodeUTF8(bytes, at: index)
        }
    }

    private static func decodeUTF8(_ bytes: [UInt8], at index: Int) -> (Key, Int)? {
        let byte = bytes[index]
        let length: Int
        switch byte {
        case 0x00..<0x80: length = 1
        case 0xC2..<0xE0: length = 2
        case 0xE0..<0xF0: length = 3
        case 0xF0..<0xF5: length = 4
        default: return (.unknown, 1) // a stray continuation or invalid lead byte
        }
        var end = index + 1
        while end < index + length {
            guard end < bytes.count else { return nil }
            guard bytes[end] & 0xC0 == 0x80 else { return (.unknown, end - index) }
            end += 1
        }
        guard let text = String(validating: bytes[index..<end], as: UTF8.self) else { return (.unknown, length) }
        return (.text(text), length)
    }

    private static func decodeEscape(_ bytes: [UInt8], at index: Int) -> (Key, Int)? {
        guard index + 1 < bytes.count else { return nil }
        let next = bytes[index + 1]
        switch next {
        case UInt8(ascii: "["): return decodeCSI(bytes, at: index)
        case UInt8(ascii: "O"):
            guard index + 2 < bytes.count else { return nil }
            return (ss3Key(bytes[index + 2]), 3)
        case UInt8(ascii: "b"): return (.wordLeft, 2)
        case UInt8(ascii: "f"): return (.wordRight, 2)
        case 0x7F: return (.control("w"), 2) // Alt-Backspace deletes a word
        case 0x1B: return (.escape, 1)
        default: return (.unknown, 2)
        }
    }

    /// `ESC [ params final`: parameters are digits and `;`, the final byte is 0x40–0x7E.
    private static func decodeCSI(_ bytes: [UInt8], at index: Int) -> (Key, Int)? {
        var end = index + 2
        while end < bytes.count, (0x20...0x3F).contains(bytes[end]) { end += 1 }
        guard end < bytes.count else { return nil }
        let final = bytes[end]
        let parameters = String(decoding: bytes[(index + 2)..<end], as: UTF8.self).split(separator: ";")
        let length = end - index + 1
        let modified = parameters.count > 1 && parameters[1] != "1"
        switch final {
        case UInt8(ascii: "A"): return (.up, length)
        case UInt8(ascii: "B"): return (.down, length)
        case UInt8(ascii: "C"): return (modified ? .wordRight : .right, length)
        case UInt8(ascii: "D"): return (modified ? .wordLeft : .left, length)
        case UInt8(ascii: "H"): return (.home, length)
        case UInt8(ascii: "F"): return (.end, length)
        case UInt8(ascii: "~"):
            switch parameters.first {
            case "1", "7": return (.home, length)
            case "4", "8": return (.end, length)
            case "3": return (.delete, length)
            case "5": return (.pageUp, length)
            case "6": return (.pageDown, length)
            default: return (.unknown, length)
            }
        default: return (.unknown, length)
        }
    }

    private static func ss3Key(_ byte: UInt8) -> Key {
        switch byte {
        case UInt8(ascii: "A"): return .up
        case UInt8(ascii: "B"): return .down
        case UInt8(ascii: "C"): return .right
        case UInt8(ascii: "D"): return .left
        case UInt8(ascii: "H"): return .home
        case UInt8(ascii: "F"): return .end
        default: return .unknown
        }
    }
}
