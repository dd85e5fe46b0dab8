import Foundation

/// The kernel's memory for sockets, machine-wide, from /proc: TCP buffer pages in use
/// (`/proc/net/sockstat`, "TCP: … mem N") and the slab caches (`/proc/meminfo` "Slab:", where
/// each socket's `tcp_sock`, inode, file and epoll entry live). Both ends of a loopback
/// connection count, and so does whatever else runs on the machine.
public struct KernelMemory: Equatable, Sendable {
    public var tcpBufferBytes: Int
    public var slabBytes: Int

    /// The figures now; nil where /proc cannot be read.
    public static func read() -> KernelMemory? {
        guard let sockstat = try? String(contentsOfFile: "/proc/net/sockstat", encoding: .utf8),
            let meminfo = try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8),
            let pages = tcpPages(sockstat: sockstat)
        else { return nil }
        return KernelMemory(tcpBufferBytes: pages * Int(sysconf(Int32(_SC_PAGESIZE))), slabBytes: ProcessStats.kilobytes("Slab:", in: meminfo) * 1024)
    }

    /// The `mem` field (pages) of the `TCP:` line of /proc/net/sockstat.
    static func tcpPages(sockstat: String) -> Int? {
        guard let line = sockstat.split(separator: "\n").first(where: { $0.hasPrefix("TCP:") }) else { return nil }
        let words = line.split(separator: " ")
        guard let index = words.firstIndex(of: "mem"), index + 1 < words.count else { return nil }
        return Int(words[index + 1])
    }

    /// The machine's load averages (1, 5, 15 minutes), as /proc/loadavg gives them.
    public static func loadAverage() -> String {
        let text = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? ""
        return text.split(separator: " ").prefix(3).joined(separator: " ")
    }
}
