import NIOCore
import SIMPCore
import SIMPRedis

/// Files the relay holds for receivers who are offline, in Redis (docs/PROTOCOL.md §5.7 and
/// §7.12). The chunks are kept as the sender sealed them (binary, never decoded): without the
/// file's key, which travels only end to end, nothing here can be read.
///
/// Keys (all of the sender's tag, so one script touches one cluster slot):
/// - `simp:file:{<sender>}:<fileId>`: hash `to` (the receiver), `size`, `chunks` (how many), and
///   `done:<device>` for each device of the receiver that has the whole file; for each further
///   receiver the sender granted the file to, `to:<user>`, and `gdone:<user>:<device>`; and
///   `finished:<user>` for each receiver all of whose devices have it.
/// - `simp:file:{<sender>}:<fileId>:chunks`: hash chunk index → sealed chunk.
/// - `simp:files:{<sender>}`: hash fileId (`fileId/<user>` for a grant) → size: what counts
///   against the sender's quota.
///
/// Both keys of a file expire `retentionSeconds` after its last chunk was written (a grant does
/// not extend it); a file is deleted earlier once every receiving device of each of its
/// receivers has it.
public struct HeldFileStore: Sendable {
    public let redis: any RedisCommands
    /// The most bytes of files one sender may have held at once.
    public let maxBytesPerUser: UInt64
    /// How long a held file is kept after its last chunk was written.
    public let retentionSeconds: Int

    public init(redis: any RedisCommands, maxBytesPerUser: UInt64, retentionSeconds: Int) {
        self.redis = redis
        self.maxBytesPerUser = maxBytesPerUser
        self.retentionSeconds = retentionSeconds
    }

    public static func fileKey(owner: String, fileId: UInt64) -> String { filePrefix(owner) + String(fileId) }
    public static func chunksKey(owner: String, fileId: UInt64) -> String { fileKey(owner: owner, fileId: fileId) + ":chunks" }
    public static func filesKey(_ owner: String) -> String { "simp:files:" + KeyTag.user(owner) }
    private static func filePrefix(_ owner: String) -> String { "simp:file:" + KeyTag.user(owner) + ":" }

    /// The refusal of a file of `size` bytes to a sender holding `used` bytes already, over `limit`.
    public static func quotaText(used: UInt64, size: UInt64, limit: UInt64) -> String {
        "this relay holds at most \(limit) bytes of files per sender for receivers who are offline; "
            + "\(used) bytes of yours are held, this file has \(size)"
    }

    /// Keeps `chunk`, unless its file is new and would take its sender past the quota.
    public func hold(_ chunk: HeldChunk, on eventLoop: EventLoop) -> EventLoopFuture<HeldChunkResult> {
        let call = RedisScript.Call(
            keys: [
                Self.fileKey(owner: chunk.owner, fileId: chunk.fileId), Self.chunksKey(owner: chunk.owner, fileId: chunk.fileId),
                Self.filesKey(chunk.owner),
            ],
            arguments: [
                String(chunk.fileId), chunk.recipient, String(chunk.fileSize), String(chunk.chunkCount), String(maxBytesPerUser),
                String(retentionSeconds * 1000), Self.filePrefix(chunk.owner), String(chunk.index),
            ], binaryArguments: [chunk.sealed])
        return Self.holdScript.run(call, on: redis, eventLoop: eventLoop).flatMapThrowing { [maxBytesPerUser] reply in
            guard let items = reply.array, items.count == 2, let held = items[0].integer, let second = items[1].integer else {
                throw RedisError("unexpected reply to holding a file chunk: \(reply)")
            }
            switch held {
            case -1: return .refused(Self.quotaText(used: UInt64(max(second, 0)), size: chunk.fileSize, limit: maxBytesPerUser))
            case -2: return .refused("file id \(chunk.fileId) is held for another receiver")
            default: return .held(complete: second == 1)
            }
        }
    }

    /// Lua: `used`, the bytes counted against the sender's quota in KEYS[3], given the files'
    /// key prefix `prefix`; entries of files that expired (grants of them too) are dropped first.
    private static let usedBytes = """
        local used = 0
        local files = redis.call('HGETALL', KEYS[3])
        for i = 1, #files, 2 do
          if redis.call('EXISTS', prefix .. string.match(files[i], '^[^/]*')) == 1 then
            used = used + tonumber(files[i + 1])
          else
            redis.call('HDEL', KEYS[3], files[i])
          end
        end
        """

    // KEYS: the file, its chunks, the sender's files. ARGV: file id, receiver, size, chunks,
    // quota (bytes), retention (ms), the files' key prefix, chunk index, the sealed chunk.
    // Returns {-1, bytes held} over the quota, {-2, 0} for a file id held for someone else,
    // else {chunks held, 1 if that is all of them}. Files of the sender that expired are
    // dropped from its quota first.
    static let holdScript = RedisScript(
        """
        local to = redis.call('HGET', KEYS[1], 'to')
        if not to then
          local prefix = ARGV[7]
          \(usedBytes)
          if used + tonumber(ARGV[3]) > tonumber(ARGV[5]) then return {-1, used} end
          redis.call('HSET', KEYS[1], 'to', ARGV[2], 'size', ARGV[3], 'chunks', ARGV[4])
          redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
        elseif to ~= ARGV[2] then
          return {-2, 0}
        end
        redis.call('HSET', KEYS[2], ARGV[8], ARGV[9])
        redis.call('PEXPIRE', KEYS[1], ARGV[6])
        redis.call('PEXPIRE', KEYS[2], ARGV[6])
        redis.call('PEXPIRE', KEYS[3], ARGV[6])
        local held = redis.call('HLEN', KEYS[2])
        if held >= tonumber(ARGV[4]) then return {held, 1} end
        return {held, 0}
        """)

    /// The chunks `fetch` asks for that are held (nil: no such file for its recipient).
    public func fetch(_ fetch: HeldFileFetch, on eventLoop: EventLoop) -> EventLoopFuture<[UInt64: [UInt8]]?> {
        let commands = [
            ["HMGET", Self.fileKey(owner: fetch.owner, fileId: fetch.fileId), "to", "to:" + fetch.recipient],
            ["HMGET", Self.chunksKey(owner: fetch.owner, fileId: fetch.fileId)] + fetch.indices.map(String.init),
        ]
        return redis.pipeline(commands, on: eventLoop).flatMapThrowing { replies in
            try Registry.check(replies)
            let receivers = replies[0].array ?? []
            guard receivers.first?.string == fetch.recipient || receivers.last?.string != nil else { return nil }
            var chunks: [UInt64: [UInt8]] = [:]
            for (index, reply) in zip(fetch.indices, replies[1].array ?? []) {
                if let sealed = reply.bytes { chunks[index] = sealed }
            }
            return chunks
        }
    }

    /// `recipient`'s `device` has the whole file: once each of the recipient's known receiving
    /// devices has said so, the file is deleted.
    /// Returns whether `device` said so for the first time (false: said before, or no such file).
    public func release(owner: String, fileId: UInt64, recipient: String, device: String, on eventLoop: EventLoop) -> EventLoopFuture<Bool> {
        redis.command(["HKEYS", Registry.devicesKey(recipient)], on: eventLoop).flatMap { [redis] devices in
            let call = RedisScript.Call(
                keys: [Self.fileKey(owner: owner, fileId: fileId), Self.chunksKey(owner: owner, fileId: fileId), Self.filesKey(owner)],
                arguments: [recipient, device, String(fileId)] + (devices.array ?? []).compactMap(\.string))
            return Self.releaseScript.run(call, on: redis, eventLoop: eventLoop).flatMapThrowing { reply in
                if let error = reply.errorMessage { throw RedisError(error) }
                return reply.array?.last?.integer == 1
            }
        }
    }

    // KEYS: the file, its chunks, the sender's files. ARGV: receiver, device, file id, then the
    // receiver's known receiving devices. Returns {0, 0} (no such file for the receiver), or
    // {1 (kept: a device of a receiver has not said it has it) or 2 (deleted), 1 if this device
    // said so for the first time, else 0}.
    static let releaseScript = RedisScript(
        """
        local to = redis.call('HGET', KEYS[1], 'to')
        if not to then return {0, 0} end
        local done = 'done:'
        if to ~= ARGV[1] then
          if redis.call('HEXISTS', KEYS[1], 'to:' .. ARGV[1]) == 0 then return {0, 0} end
          done = 'gdone:' .. ARGV[1] .. ':'
        end
        local added = redis.call('HSET', KEYS[1], done .. ARGV[2], '1')
        for i = 4, #ARGV do
          if redis.call('HEXISTS', KEYS[1], done .. ARGV[i]) == 0 then return {1, added} end
        end
        redis.call('HSET', KEYS[1], 'finished:' .. ARGV[1], '1')
        local fields = redis.call('HKEYS', KEYS[1])
        local receivers = {to}
        for _, field in ipairs(fields) do
          if string.sub(field, 1, 3) == 'to:' then table.insert(receivers, string.sub(field, 4)) end
        end
        for _, user in ipairs(receivers) do
          if redis.call('HEXISTS', KEYS[1], 'finished:' .. user) == 0 then return {1, added} end
        end
        redis.call('DEL', KEYS[1], KEYS[2])
        redis.call('HDEL', KEYS[3], ARGV[3])
        for i = 2, #receivers do redis.call('HDEL', KEYS[3], ARGV[3] .. '/' .. receivers[i]) end
        return {2, added}
        """)

    /// Lets `grant.recipient` fetch the owner's file too, if the store holds it whole, within
    /// the owner's quota (the grant counts the file's size again); its expiry is left alone.
    public func grant(_ grant: HeldFileGrant, on eventLoop: EventLoop) -> EventLoopFuture<HeldFileGrantResult> {
        let call = RedisScript.Call(
            keys: [
                Self.fileKey(owner: grant.owner, fileId: grant.fileId), Self.chunksKey(owner: grant.owner, fileId: grant.fileId),
                Self.filesKey(grant.owner),
            ],
            arguments: [
                String(grant.fileId), grant.recipient, String(maxBytesPerUser), Self.filePrefix(grant.owner), String(HeldFileGrant.maxPerFile),
            ])
        return Self.grantScript.run(call, on: redis, eventLoop: eventLoop).flatMapThrowing { [maxBytesPerUser] reply in
            guard let items = reply.array, items.count == 3, let first = items[0].integer, let used = items[1].integer,
                let size = items[2].integer
            else { throw RedisError("unexpected reply to granting a held file: \(reply)") }
            switch first {
            case -3: return .notHeld
            case -4: return .refused(HeldFileGrant.tooManyText)
            case -1: return .refused(Self.quotaText(used: UInt64(max(used, 0)), size: UInt64(max(size, 0)), limit: maxBytesPerUser))
            default: return .granted(chunks: UInt64(max(first, 0)))
            }
        }
    }

    // KEYS: the file, its chunks, the sender's files. ARGV: file id, receiver, quota (bytes),
    // the files' key prefix, the most grants per file. Returns {-3, 0, 0} when the file is not
    // held whole, {-4, 0, 0} past the grants per file, {-1, bytes held, size} over the quota,
    // else {chunks, 0, size} (granted now or before).
    static let grantScript = RedisScript(
        """
        local to = redis.call('HGET', KEYS[1], 'to')
        if not to then return {-3, 0, 0} end
        local chunks = tonumber(redis.call('HGET', KEYS[1], 'chunks'))
        local size = tonumber(redis.call('HGET', KEYS[1], 'size'))
        if redis.call('HLEN', KEYS[2]) < chunks then return {-3, 0, 0} end
        if to == ARGV[2] or redis.call('HEXISTS', KEYS[1], 'to:' .. ARGV[2]) == 1 then return {chunks, 0, size} end
        local grants = 0
        for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
          if string.sub(field, 1, 3) == 'to:' then grants = grants + 1 end
        end
        if grants >= tonumber(ARGV[5]) then return {-4, 0, 0} end
        local prefix = ARGV[4]
        \(usedBytes)
        if used + size > tonumber(ARGV[3]) then return {-1, used, size} end
        redis.call('HSET', KEYS[1], 'to:' .. ARGV[2], '1')
        redis.call('HSET', KEYS[3], ARGV[1] .. '/' .. ARGV[2], size)
        return {chunks, 0, size}
        """)
}
