import NIOConcurrencyHelpers
import Prometheus

#if canImport(Glibc)
import Glibc
#endif

/// The relay process's own figures under the names Prometheus client libraries use
/// (`process_cpu_seconds_total`, `process_resident_memory_bytes`, …), read from Linux's /proc
/// when /metrics is scraped.
final class ProcessMetrics: Sendable {
    private let cpuSeconds: Counter
    private let residentBytes: Gauge
    private let virtualBytes: Gauge
    private let openFDs: Gauge
    private let maxFDs: Gauge
    private let startTime: Gauge
    /// CPU seconds already added to the counter (it only counts up).
    private let reportedCPUSeconds = NIOLockedValueBox<Double>(0)

    init(registry: PrometheusCollectorRegistry) {
        func describe(_ name: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
        }
        cpuSeconds = registry.makeCounter(
            descriptor: describe("process_cpu_seconds_total", "User and system CPU time spent by the relay process, in seconds."))
        residentBytes = registry.makeGauge(descriptor: describe("process_resident_memory_bytes", "Resident memory of the relay process, in bytes."))
        virtualBytes = registry.makeGauge(descriptor: describe("process_virtual_memory_bytes", "Virtual memory size of the relay process, in bytes."))
        openFDs = registry.makeGauge(
            descriptor: describe("process_open_fds", "File descriptors the relay process has open (every client connection holds one)."))
        maxFDs = registry.makeGauge(
            descriptor: describe("process_max_fds", "The relay process's limit of open file descriptors (soft RLIMIT_NOFILE)."))
        startTime = registry.makeGauge(
            descriptor: describe("process_start_time_seconds", "When the relay process started, in seconds since the Unix epoch."))
        update()
    }

    /// Reads /proc/self and sets every figure; those that cannot be read keep their value.
    func update() {
        guard let sample = ProcessSample.current() else { return }
        reportedCPUSeconds.withLockedValue { reported in
            if sample.cpuSeconds > reported { cpuSeconds.increment(by: sample.cpuSeconds - reported) }
            reported = max(reported, sample.cpuSeconds)
        }
        residentBytes.set(Double(sample.residentBytes))
        virtualBytes.set(Double(sample.virtualBytes))
        startTime.set(sample.startTimeSeconds)
        if let open = ProcessSample.openFileDescriptors() { openFDs.set(Double(open)) }
        if let limit = ProcessSample.fileDescriptorLimit() { maxFDs.set(Double(limit)) }
    }
}

/// One reading of the current process's /proc/self/stat.
struct ProcessSample: Equatable {
    var cpuSeconds: Double
    var residentBytes: Int
    var virtualBytes: Int
    var startTimeSeconds: Double

    /// The current process's figures; nil where /proc is unavailable.
    static func current() -> ProcessSample? {
        guard let stat = readFile("/proc/self/stat"), let bootTime = bootTime() else { return nil }
        return ProcessSample(
            statLine: stat, clockTicksPerSecond: Double(sysconf(Int32(_SC_CLK_TCK))),
            pageSize: sysconf(Int32(_SC_PAGESIZE)), bootTime: bootTime)
    }

    /// Parses a `/proc/<pid>/stat` line (proc(5)): utime and stime (fields 14, 15), starttime
    /// (22, clock ticks after boot), vsize (23, bytes) and rss (24, pages). Fields are counted
    /// after the command name's closing parenthesis, since the name may contain spaces.
    init?(statLine: String, clockTicksPerSecond ticks: Double, pageSize: Int, bootTime: Double) {
        guard let close = statLine.lastIndex(of: ")") else { return nil }
        let fields = statLine[statLine.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state), so field n is fields[n - 3].
        func field(_ n: Int) -> Double? { fields.count > n - 3 ? Double(fields[n - 3]) : nil }
        guard ticks > 0, let user = field(14), let system = field(15), let start = field(22),
            let virtual = field(23), let resident = field(24)
        else { return nil }
        cpuSeconds = (user + system) / ticks
        startTimeSeconds = bootTime + start / ticks
        virtualBytes = Int(virtual)
        residentBytes = Int(resident) * pageSize
    }

    /// Seconds since the epoch at which the machine booted: the wall clock minus the time
    /// since boot (not /proc/stat's `btime`, which a sandbox with `ProcSubset=pid` hides).
    static func bootTime() -> Double? {
        var wall = timespec(), sinceBoot = timespec()
        guard clock_gettime(CLOCK_REALTIME, &wall) == 0, clock_gettime(CLOCK_BOOTTIME, &sinceBoot) == 0 else { return nil }
        return Double(wall.tv_sec - sinceBoot.tv_sec) + Double(wall.tv_nsec - sinceBoot.tv_nsec) / 1e9
    }

    /// Entries of /proc/self/fd, not counting the one used to list them.
    static func openFileDescriptors() -> Int? {
        guard let directory = opendir("/proc/self/fd") else { return nil }
        defer { closedir(directory) }
        var count = 0
        // The name is read where it lies: a `dirent` is only as long as its name, so copying the
        // whole struct (`entry.pointee`) could read past the end of the directory buffer, which
        // crashed a relay with 18,000 connections on a metrics scrape.
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        while let entry = readdir(directory) {
            let name = (UnsafeRawPointer(entry) + nameOffset).assumingMemoryBound(to: CChar.self)
            if strcmp(name, ".") != 0 && strcmp(name, "..") != 0 { count += 1 }
        }
        return max(0, count - 1)
    }

    /// The soft limit of open files.
    static func fileDescriptorLimit() -> Int? {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        return limit.rlim_cur == rlim_t.max ? nil : Int(limit.rlim_cur)
    }

    /// A small /proc file's text (their size reads as 0, so they are read to the end in chunks).
    static func readFile(_ path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            bytes += chunk[0..<count]
            if count < chunk.count { break }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
