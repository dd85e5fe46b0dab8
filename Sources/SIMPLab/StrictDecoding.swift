/// Strict reading of scenario files: an unknown key or a value out of range is an error that
/// names the key's path and what is allowed, instead of being ignored. `Scenario.load` adds the
/// file name.

/// Any JSON object key, to list the keys an object actually has.
struct AnyCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) {
        self.stringValue = "[\(intValue)]"
        self.intValue = intValue
    }
}

extension Decoder {
    /// Throws if the JSON object being decoded has a key that `Keys` does not name.
    func rejectUnknownKeys<Keys: CodingKey & CaseIterable>(_ keys: Keys.Type) throws {
        let allowed = Keys.allCases.map(\.stringValue)
        let present = try container(keyedBy: AnyCodingKey.self).allKeys
        for key in present.sorted(by: { $0.stringValue < $1.stringValue }) where !allowed.contains(key.stringValue) {
            var message = "unknown key; allowed here: " + allowed.joined(separator: ", ")
            if let guess = StrictDecoding.closest(to: key.stringValue, among: allowed) { message += " (did you mean \"\(guess)\"?)" }
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath + [key], debugDescription: message))
        }
    }
}

extension KeyedDecodingContainer {
    /// A number within `range`, or `value` when the key is absent.
    func decode(_ key: Key, in range: ClosedRange<Double>, default value: Double) throws -> Double {
        try decodeIfPresent(key, in: range) ?? value
    }

    /// A number within `range`, or nil when the key is absent.
    func decodeIfPresent(_ key: Key, in range: ClosedRange<Double>) throws -> Double? {
        guard let value = try decodeIfPresent(Double.self, forKey: key) else { return nil }
        guard range.contains(value) else { throw outOfRange(key, value: StrictDecoding.format(value), allowed: StrictDecoding.describe(range)) }
        return value
    }

    /// A whole number within `range`, or `value` when the key is absent.
    func decode(_ key: Key, in range: ClosedRange<Int>, default value: Int) throws -> Int {
        try decodeIfPresent(key, in: range) ?? value
    }

    /// A whole number within `range`, or nil when the key is absent.
    func decodeIfPresent(_ key: Key, in range: ClosedRange<Int>) throws -> Int? {
        guard let number = try decodeIfPresent(Int.self, forKey: key) else { return nil }
        guard range.contains(number) else { throw outOfRange(key, value: "\(number)", allowed: StrictDecoding.describe(range)) }
        return number
    }

    /// A number that must be present and within `range`.
    func decodeRequired(_ key: Key, in range: ClosedRange<Double>) throws -> Double {
        _ = try decode(Double.self, forKey: key) // "missing" error if absent
        return try decodeIfPresent(key, in: range)!
    }

    /// One of the raw values of `T`, with the allowed values in the error.
    func decodeChoice<T: RawRepresentable & CaseIterable>(_ type: T.Type, forKey key: Key) throws -> T? where T.RawValue == String {
        guard let raw = try decodeIfPresent(String.self, forKey: key) else { return nil }
        guard let value = T(rawValue: raw) else {
            throw outOfRange(key, value: "\"\(raw)\"", allowed: "one of " + T.allCases.map { $0.rawValue }.joined(separator: ", "))
        }
        return value
    }

    private func outOfRange(_ key: Key, value: String, allowed: String) -> DecodingError {
        .dataCorrupted(.init(codingPath: codingPath + [key], debugDescription: "\(value) is not allowed; allowed: \(allowed)"))
    }
}

enum StrictDecoding {
    /// The allowed key closest to a misspelt one, if it is close (at most two edits, or a case change).
    static func closest(to key: String, among allowed: [String]) -> String? {
        let scored = allowed.map { ($0, distance($0.lowercased(), key.lowercased())) }
        guard let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= 2 else { return nil }
        return best.0
    }

    /// Levenshtein distance.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var previous = Array(0...b.count)
        for i in 1...max(1, a.count) where !a.isEmpty {
            var current = [i] + [Int](repeating: 0, count: b.count)
            for j in 1...max(1, b.count) where !b.isEmpty {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }

    static func describe(_ range: ClosedRange<Double>) -> String {
        if range.upperBound == .infinity {
            return range.lowerBound == .leastNonzeroMagnitude ? "a number > 0" : "a number ≥ \(format(range.lowerBound))"
        }
        return "\(format(range.lowerBound))…\(format(range.upperBound))"
    }

    static func describe(_ range: ClosedRange<Int>) -> String {
        if range.upperBound == .max { return "a whole number ≥ \(range.lowerBound)" }
        return "a whole number in \(range.lowerBound)…\(range.upperBound)"
    }

    static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }

    /// Numbers that are percentages.
    static let percent: ClosedRange<Double> = 0...100
    /// Durations and other non-negative amounts.
    static let nonNegative: ClosedRange<Double> = 0...Double.infinity
    /// Strictly positive amounts (a rate, an interval).
    static let positive: ClosedRange<Double> = Double.leastNonzeroMagnitude...Double.infinity
}
