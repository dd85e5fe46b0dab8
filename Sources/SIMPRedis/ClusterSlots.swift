/// Redis Cluster's key to slot function (CRC16-XMODEM mod 16384, with hash tags).
public enum RedisKeySlot {
    public static let count = 16384

    /// The slot of `key`: when the key holds a hash tag (a `{` followed later by a `}` with at
    /// least one byte between them), only the bytes between the first `{` and the first `}`
    /// after it are hashed, so `simp:user:{alice}` and `simp:seen:{alice}` share a slot.
    public static func slot<Key: Collection>(of key: Key) -> Int where Key.Element == UInt8 {
        let bytes = Array(key)
        if let open = bytes.firstIndex(of: UInt8(ascii: "{")),
            let close = bytes[(open + 1)...].firstIndex(of: UInt8(ascii: "}")), close > open + 1
        {
            return Int(crc16(bytes[(open + 1)..<close]) % UInt16(count))
        }
        return Int(crc16(bytes[...]) % UInt16(count))
    }

    /// The slot of a text key.
    public static func slot(of key: String) -> Int { slot(of: Array(key.utf8)) }

    /// CRC16 with polynomial 0x1021, initial value 0 (XMODEM), as the cluster specification uses.
    static func crc16(_ bytes: ArraySlice<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes { crc = (crc << 8) ^ table[Int(UInt8(crc >> 8) ^ byte)] }
        return crc
    }

    private static let table: [UInt16] = (0..<256).map { index in
        var crc = UInt16(index) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        return crc
    }

    /// The argument whose slot routes a command; nil for commands without keys.
    static func routingKey(of command: [[UInt8]]) -> [UInt8]? {
        guard let name = command.first.map({ String(decoding: $0, as: UTF8.self).uppercased() }) else { return nil }
        switch name {
        case "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO":
            guard command.count > 3, let keys = Int(String(decoding: command[2], as: UTF8.self)), keys > 0 else { return nil }
            return command[3]
        case "PING", "ECHO", "INFO", "SCRIPT", "CLUSTER", "MULTI", "EXEC", "DISCARD", "SCAN", "KEYS", "DBSIZE",
            "FLUSHALL", "FLUSHDB", "TIME", "CONFIG", "CLIENT", "SELECT", "AUTH", "HELLO", "COMMAND", "WAIT",
            "ASKING", "READONLY", "RANDOMKEY", "FUNCTION", "ACL", "MEMORY", "LATENCY", "SLOWLOG":
            return nil
        case "OBJECT", "XGROUP", "XINFO":
            return command.count > 2 ? command[2] : nil
        case "XREAD", "XREADGROUP":
            // The keys follow STREAMS (all of one slot on a cluster).
            let streams = command.firstIndex { String(decoding: $0, as: UTF8.self).uppercased() == "STREAMS" }
            return streams.flatMap { $0 + 1 < command.count ? command[$0 + 1] : nil }
        default:
            return command.count > 1 ? command[1] : nil
        }
    }
}

/// One cluster node's address.
struct ClusterNode: Hashable, Sendable {
    var host: String
    var port: Int
    var address: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// Which master serves each slot, from `CLUSTER SLOTS`.
struct ClusterSlotMap: Sendable {
    /// Index into `masters` per slot; -1 where no node serves the slot.
    private var owners: [Int16]
    private(set) var masters: [ClusterNode]

    func owner(of slot: Int) -> ClusterNode? {
        let index = owners[slot]
        return index < 0 ? nil : masters[Int(index)]
    }

    /// Parses a `CLUSTER SLOTS` reply: `[[start, end, [host, port, id, …], replicas…], …]`.
    /// An empty host means "the node you asked" (`askedHost`).
    init(clusterSlots reply: RedisValue, askedHost: String) throws {
        guard let ranges = reply.array else { throw RedisError("CLUSTER SLOTS answered \(reply)") }
        owners = Array(repeating: -1, count: RedisKeySlot.count)
        masters = []
        for range in ranges {
            guard let parts = range.array, parts.count >= 3, let start = parts[0].integer, let end = parts[1].integer,
                let master = parts[2].array, master.count >= 2, let host = master[0].string, let port = master[1].integer,
                start >= 0, end < RedisKeySlot.count, start <= end
            else {
                throw RedisError("CLUSTER SLOTS answered an entry this client does not understand: \(range)")
            }
            let node = ClusterNode(host: host.isEmpty || host == "?" ? askedHost : host, port: Int(port))
            let index =
                masters.firstIndex(of: node)
                ?? {
                    masters.append(node); return masters.count - 1
                }()
            for slot in Int(start)...Int(end) { owners[slot] = Int16(index) }
        }
        guard !masters.isEmpty else { throw RedisError("the Redis Cluster serves no slots (not created yet?)") }
    }
}
