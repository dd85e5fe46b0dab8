import Foundation
import NIOCore
import SIMPCore
import SIMPRedis

/// End-to-end key bundles in Redis (docs/PROTOCOL.md §4.8 and §7). The relay stores what
/// devices publish without reading it; bundles hold public keys only.
///
/// Keys:
/// - `simp:keys:{<user>}`: hash device → base64 of the device's bundle (without one-time prekeys).
/// - `simp:keys:{<user>}:otk:<device>`: set of base64 one-time prekeys not handed out yet. A fetch
///   takes one with `SPOP`, which is atomic: no two senders get the same prekey.
/// - `simp:keys:{<user>}:device-list`: base64 of the user's signed device list (docs/E2E.md §3.4),
///   as the last KEYS_PUBLISH that carried one published it.
/// - `simp:keys:{<user>}:device-list-leaf`: the index of that list's leaf in the key directory log.
/// - `simp:key-log`: the key directory log (docs/E2E.md §18): a list of base64 leaf hashes, one
///   appended for every device list that differs from the user's kept one; never shortened.
/// - `simp:key-log:tree-key`: base64 of the relay's tree key (`TreeHeadSigningKey.secretBytes`),
///   set once by the first relay that needs it (`SET NX`); every relay of the store signs with it.
/// - `simp:keys:{<user>}:watchers`: sorted set of the users who fetched the bundles, scored by
///   the time of their latest fetch (ms); told when a bundle is new or changes.
public struct KeyBundleStore: Sendable {
    public let redis: any RedisCommands
    /// Devices of one user with a bundle (`RelayLimits.maxDevicesPerUser`).
    public let maxDevices: Int

    public init(redis: any RedisCommands, maxDevices: Int = RelayLimits().maxDevicesPerUser) {
        self.redis = redis
        self.maxDevices = max(1, maxDevices)
    }

    public static func bundlesKey(_ user: String) -> String { "simp:keys:" + KeyTag.user(user) }
    public static func prekeysKey(_ user: String, device: String) -> String { bundlesKey(user) + ":otk:" + device }
    public static func watchersKey(_ user: String) -> String { bundlesKey(user) + ":watchers" }
    public static func deviceListKey(_ user: String) -> String { bundlesKey(user) + ":device-list" }
    public static func deviceListLeafKey(_ user: String) -> String { bundlesKey(user) + ":device-list-leaf" }
    public static let keyLogKey = "simp:key-log"
    public static let treeKeyKey = "simp:key-log:tree-key"

    /// Keeps the bundle (replacing the device's earlier one) and adds the one-time prekeys;
    /// returns how many the device has in the store now, how the bundle compares with the
    /// earlier one, and who fetched the user's bundles within `RelayCore.keyWatchPeriod`. Nil:
    /// nothing was kept, the device would be one more than the `maxDevices` the user may have.
    public func publish(
        _ keys: KeysPublish, on eventLoop: EventLoop
    ) -> EventLoopFuture<(left: Int, change: KeysPublish.Change, watchers: [String])?> {
        let since = Self.milliseconds() - Int64(RelayCore.keyWatchPeriod.nanoseconds / 1_000_000)
        let call = RedisScript.Call(
            keys: [
                Self.bundlesKey(keys.user), Self.prekeysKey(keys.user, device: keys.device), Registry.devicesKey(keys.user),
                Self.deviceListKey(keys.user),
            ],
            arguments: [
                keys.device, Data(keys.bundle).base64EncodedString(), String(maxDevices), Self.prekeysKey(keys.user, device: ""),
                String(RelayCore.maxOneTimePrekeysPerDevice), Data(keys.deviceList).base64EncodedString(),
            ] + keys.oneTimePrekeys.map { Data($0).base64EncodedString() })
        let watchers = ["ZRANGEBYSCORE", Self.watchersKey(keys.user), String(since), "+inf"]
        return Self.publishScript.run([call], after: [watchers], on: redis, eventLoop: eventLoop).flatMapThrowing { replies in
            try Registry.check(replies)
            guard let items = replies[1].array, let left = items.first?.integer else { throw RedisError("unexpected publish reply \(replies[1])") }
            guard left >= 0, items.count == 3 else { return nil }
            let change: KeysPublish.Change = items[1].integer == 0 ? .unchanged : items[1].integer == 1 ? .changed : .newDevice
            return (Int(left), change, (replies[0].array ?? []).compactMap(\.string), items[2].integer == 1)
        }.flatMap { [redis] (published: (left: Int, change: KeysPublish.Change, watchers: [String], newList: Bool)?) in
            guard let published else { return eventLoop.makeSucceededFuture(nil) }
            let result = (published.left, published.change, published.watchers)
            guard published.newList else { return eventLoop.makeSucceededFuture(result) }
            return appendToLog(keys, redis: redis, on: eventLoop).map { result }
        }
    }

    /// Appends a newly kept device list's leaf to the key directory log and records where it is.
    /// Not atomic with the publish (the log's key lives in no user's slot): a relay that stops
    /// between the two leaves the list out of the log, and fetchers are told it is not proved.
    private func appendToLog(_ keys: KeysPublish, redis: any RedisCommands, on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        let leaf = Data(KeyLogSnapshot.leafHash(of: keys.deviceList)).base64EncodedString()
        return redis.pipeline([["RPUSH", Self.keyLogKey, leaf]], on: eventLoop).flatMapThrowing { replies in
            try Registry.check(replies)
            guard let length = replies[0].integer else { throw RedisError("unexpected RPUSH reply \(replies[0])") }
            return length - 1
        }.flatMap { index in
            redis.pipeline([["SET", Self.deviceListLeafKey(keys.user), String(index)]], on: eventLoop).flatMapThrowing { try Registry.check($0) }
        }
    }

    // KEYS: the user's bundles, the device's one-time prekeys, the user's known receiving devices
    // (Registry), the user's device list. ARGV: device, bundle, devices the user may have, the
    // prekeys keys' prefix, prekeys a device may have, the device list (empty: keep the one
    // kept), then the one-time prekeys to add.
    // A bundle of a new device when the user has `maxDevices` bundles first drops the bundles
    // (and prekeys) of devices the registry no longer knows (forgotten, or send-only ones);
    // if that leaves no room, nothing is written: {-1}. Else {prekeys the device has, 0 the
    // same bundle / 1 another / 2 the device had none, 1 when the device list kept is new else
    // 0}; prekeys beyond the cap are dropped.
    static let publishScript = RedisScript(
        """
        local old = redis.call('HGET', KEYS[1], ARGV[1])
        if not old and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then
          for _, device in ipairs(redis.call('HKEYS', KEYS[1])) do
            if redis.call('HEXISTS', KEYS[3], device) == 0 then
              redis.call('HDEL', KEYS[1], device)
              redis.call('DEL', ARGV[4] .. device)
            end
          end
          if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return {-1} end
        end
        redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
        local newList = 0
        if ARGV[6] ~= '' and redis.call('GET', KEYS[4]) ~= ARGV[6] then
          redis.call('SET', KEYS[4], ARGV[6])
          newList = 1
        end
        local room = tonumber(ARGV[5]) - redis.call('SCARD', KEYS[2])
        for i = 7, #ARGV do
          if room <= 0 then break end
          room = room - redis.call('SADD', KEYS[2], ARGV[i])
        end
        local change = 2
        if old then change = old == ARGV[2] and 0 or 1 end
        return {redis.call('SCARD', KEYS[2]), change, newList}
        """)

    private static func milliseconds() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    /// Every device's bundle, sorted by device, each with a one-time prekey taken from the store
    /// unless the device is in `skipClaimFor` (two round trips: the bundles, then one `SPOP` and
    /// one `SCARD` per device: how many it has left), and whether the user exists (credentials, registered lately, or bundles).
    public func fetch(
        _ fetch: KeysFetch, on eventLoop: EventLoop
    ) -> EventLoopFuture<(devices: [DeviceKeys], known: Bool, deviceList: [UInt8], log: KeyLogSnapshot?)> {
        var random = SystemRandomNumberGenerator()
        let newTreeKey = Data(KeyLogSnapshot.newTreeKeySecret(using: &random).bytes).base64EncodedString()
        var commands = [
            ["HGETALL", Self.bundlesKey(fetch.user)], ["EXISTS", Registry.seenKey(fetch.user)], ["EXISTS", CredentialStore.key(fetch.user)],
            ["GET", Self.deviceListKey(fetch.user)],
            // The key directory log (the leaf first: the log only grows, so it holds the leaf).
            ["GET", Self.deviceListLeafKey(fetch.user)], ["LRANGE", Self.keyLogKey, "0", "-1"], ["SET", Self.treeKeyKey, newTreeKey, "NX"],
            ["GET", Self.treeKeyKey],
        ]
        if !fetch.asker.isEmpty {
            let now = Self.milliseconds(), period = Int64(RelayCore.keyWatchPeriod.nanoseconds / 1_000_000)
            commands += [
                ["ZADD", Self.watchersKey(fetch.user), String(now), fetch.asker],
                ["ZREMRANGEBYSCORE", Self.watchersKey(fetch.user), "-inf", String(now - period)],
                ["PEXPIRE", Self.watchersKey(fetch.user), String(period)],
            ]
        }
        return redis.pipeline(commands, on: eventLoop).flatMapThrowing { replies -> ([(String, [UInt8])], Bool, [UInt8], KeyLogSnapshot?) in
            try Registry.check(replies)
            let fields = (replies[0].array ?? []).compactMap(\.string)
            let bundles = stride(from: 0, to: fields.count - 1, by: 2).compactMap { index in
                Data(base64Encoded: fields[index + 1]).map { (fields[index], Array($0)) }
            }.sorted { $0.0 < $1.0 }
            let deviceList = replies[3].string.flatMap { Data(base64Encoded: $0) }.map { Array($0) } ?? []
            let known = !bundles.isEmpty || replies[1].integer == 1 || replies[2].integer == 1
            return (bundles, known, deviceList, Self.keyLog(leaf: replies[4], leaves: replies[5], treeKey: replies[7]))
        }.flatMap { [redis] bundles, known, deviceList, log in
            let claims = bundles.map(\.0).filter { !fetch.skipClaimFor.contains($0) }
            guard !claims.isEmpty else {
                return eventLoop.makeSucceededFuture(
                    (bundles.map { DeviceKeys(device: $0.0, bundle: $0.1, oneTimePrekey: nil) }, known, deviceList, log))
            }
            // Each SPOP is followed by an SCARD: how many the device has left after the claim.
            let commands = claims.flatMap {
                [["SPOP", Self.prekeysKey(fetch.user, device: $0)], ["SCARD", Self.prekeysKey(fetch.user, device: $0)]]
            }
            return redis.pipeline(commands, on: eventLoop).flatMapThrowing { replies in
                try Registry.check(replies)
                var claimed: [String: (prekey: [UInt8], left: Int)] = [:]
                for (index, device) in claims.enumerated() where 2 * index + 1 < replies.count {
                    if let text = replies[2 * index].string, let prekey = Data(base64Encoded: text) {
                        claimed[device] = (Array(prekey), Int(replies[2 * index + 1].integer ?? 0))
                    }
                }
                return (
                    bundles.map {
                        DeviceKeys(device: $0.0, bundle: $0.1, oneTimePrekey: claimed[$0.0]?.prekey, prekeysLeft: claimed[$0.0]?.left)
                    }, known, deviceList, log
                )
            }
        }
    }

    /// The log as the fetch read it: nil when the tree key is missing or not base64 (a leaf that
    /// is not base64 is left out, so the list's proof fails and the client says so).
    private static func keyLog(leaf: RedisValue, leaves: RedisValue, treeKey: RedisValue) -> KeyLogSnapshot? {
        guard let key = treeKey.string.flatMap({ Data(base64Encoded: $0) }) else { return nil }
        return KeyLogSnapshot(
            leafHashes: (leaves.array ?? []).compactMap { $0.string.flatMap { Data(base64Encoded: $0) }.map { Array($0) } },
            listIndex: leaf.string.flatMap { Int($0) }, treeKeySecret: TreeKeySecret(Array(key)), timestampMillis: UInt64(max(0, milliseconds())))
    }
}
