import Foundation

/// CPU time and memory of a process, read from Linux's /proc.
public struct ProcessStats: Equatable, Sendable {
    /// User plus system CPU time so far, in seconds.
    public var cpuSeconds: Double
    /// Resident set size now, bytes.
    public var rssBytes: Int
    /// Peak resident set size (VmHWM), bytes.
    public var peakRSSBytes: Int

    /// Reads the figures of process `pid`; nil if it is gone or /proc is unavailable.
    public static func read(pid: Int32) -> ProcessStats? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let cpu = cpuSeconds(statLine: stat)
        else { return nil }
        return ProcessStats(
            cpuSeconds: cpu, rssBytes: kilobytes("VmRSS:", in: status) * 1024,
            peakRSSBytes: kilobytes("VmHWM:", in: status) * 1024)
    }

    /// utime + stime from a /proc/<pid>/stat line (fields 14 and 15; the command name in
    /// parentheses may contain spaces, so fields are counted after its closing parenthesis).
    static func cpuSeconds(statLine: String) -> Double? {
        guard let close = statLine.lastIndex(of: ")") else { return nil }
        let fields = statLine[statLine.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state), so field n is fields[n - 3].
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    static func kilobytes(_ key: String, in status: String) -> Int {
        for line in status.split(separator: "\n") where line.hasPrefix(key) {
            return Int(line.dropFirst(key.count).split(whereSeparator: \.isWhitespace).first ?? "") ?? 0
        }
        return 0
    }
}

/// The machine the bench runs on, for reports.
public struct MachineInfo: Codable, Equatable, Sendable {
    public var nproc: Int
    public var cpuModel: String

    enum CodingKeys: String, CodingKey { case nproc, cpuModel = "cpu_model" }

    public static func current() -> MachineInfo {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { String($0.split(separator: ":", maxSplits: 1).last ?? "").trimmingCharacters(in: .whitespaces) }
        return MachineInfo(nproc: ProcessInfo.processInfo.activeProcessorCount, cpuModel: model ?? "unknown")
    }
}
