import Logging

#if canImport(Glibc)
import Glibc
#endif

/// A `LogHandler` that writes each record as one JSON object on one line, for log shippers
/// (journald, Vector, Fluent Bit, Loki, Elasticsearch).
///
/// ```
/// {"time":"2026-11-23T15:37:11.042Z","level":"info","logger":"simp.relay","message":"user connected","udp":"127.0.0.1:5001","user":"alice"}
/// ```
///
/// `time` is UTC with milliseconds (RFC 3339), `level` one of swift-log's level names, `logger`
/// the logger's label. Metadata (the handler's, the provider's, then the record's; later ones win)
/// follows as top-level fields in key order; a key that clashes with one of those four fields or
/// with `error` is written as `metadata_<key>`. Nested metadata becomes JSON arrays and objects.
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let write: @Sendable (String) -> Void
    private let clock: @Sendable () -> timespec

    /// A handler for `label` that hands each finished line (ending in a newline) to `write`;
    /// `clock` gives the wall-clock time of a record.
    public init(
        label: String, metadataProvider: Logger.MetadataProvider? = LoggingSystem.metadataProvider,
        clock: @escaping @Sendable () -> timespec = JSONLogHandler.now,
        write: @escaping @Sendable (String) -> Void
    ) {
        self.label = label
        self.metadataProvider = metadataProvider
        self.clock = clock
        self.write = write
    }

    /// A handler writing to standard error, one `write(2)` per line so concurrent records never
    /// interleave.
    public static func standardError(label: String) -> JSONLogHandler {
        JSONLogHandler(label: label, write: writeToStandardError)
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields = metadata
        if let provided = metadataProvider?.get() { fields.merge(provided) { $1 } }
        if let own = event.metadata { fields.merge(own) { $1 } }
        var line = "{\"time\":"
        JSONText.appendString(Self.timestamp(clock()), to: &line)
        line += ",\"level\":"
        JSONText.appendString(event.level.rawValue, to: &line)
        line += ",\"logger\":"
        JSONText.appendString(label, to: &line)
        line += ",\"message\":"
        JSONText.appendString(event.message.description, to: &line)
        if let error = event.error {
            line += ",\"error\":"
            JSONText.appendString("\(error)", to: &line)
        }
        for key in fields.keys.sorted() {
            line += ","
            JSONText.appendString(Self.reservedKeys.contains(key) ? "metadata_" + key : key, to: &line)
            line += ":"
            JSONText.append(fields[key]!, to: &line)
        }
        line += "}\n"
        write(line)
    }

    private static let reservedKeys: Set<String> = ["time", "level", "logger", "message", "error"]

    /// The current wall-clock time.
    @Sendable public static func now() -> timespec {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return time
    }

    /// `time` as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    static func timestamp(_ time: timespec) -> String {
        var seconds = time.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let millis = Int(time.tv_nsec / 1_000_000)
        let millisText = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(millisText)Z"
    }

    @Sendable private static func writeToStandardError(_ line: String) {
        var bytes = Array(line.utf8)
        bytes.withUnsafeMutableBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(STDERR_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0 && errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }
}

/// JSON text for log lines: strings escaped per RFC 8259, metadata values as JSON values.
enum JSONText {
    static func append(_ value: Logger.Metadata.Value, to out: inout String) {
        switch value {
        case .string(let text): appendString(text, to: &out)
        case .stringConvertible(let convertible): appendString(convertible.description, to: &out)
        case .array(let values):
            out += "["
            for (index, element) in values.enumerated() {
                if index > 0 { out += "," }
                append(element, to: &out)
            }
            out += "]"
        case .dictionary(let entries):
            out += "{"
            for (index, key) in entries.keys.sorted().enumerated() {
                if index > 0 { out += "," }
                appendString(key, to: &out)
                out += ":"
                append(entries[key]!, to: &out)
            }
            out += "}"
        }
    }

    /// Appends `text` as a quoted JSON string: `"` and `\` escaped, control characters as
    /// `\n`, `\r`, `\t` or `\u00XX`; everything else as UTF-8.
    static func appendString(_ text: String, to out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}
