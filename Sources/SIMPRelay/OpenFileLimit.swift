#if canImport(Glibc)
import Glibc
#endif

/// The process's open-file limit: every session holds a socket.
public enum OpenFileLimit {
    /// Lifts the soft limit to the hard one; child processes inherit it.
    public static func raiseToHardLimit() {
        var limit = rlimit()
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        guard getrlimit(resource, &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(resource, &limit)
    }
}
