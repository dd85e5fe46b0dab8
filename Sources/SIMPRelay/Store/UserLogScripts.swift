import SIMPRedis

/// The Lua scripts of a user's durable log (`InboxStore`, docs/PROTOCOL.md §7.8). Every script
/// takes the same four keys, all of one user (one hash tag, one cluster slot):
/// `KEYS[1]` the log stream, `KEYS[2]` the dedupe keys → stream ids hash, `KEYS[3]` the cursors
/// hash, `KEYS[4]` the user's known devices hash; and `ARGV[1]` the prefix of the devices' acked
/// sets (`simp:log-acked:{<user>}:d:`, the device name follows).
///
/// Each log entry has the fields `e` (the `InboxEntry` text) and `k` (its dedupe key). The
/// cursors hash holds `c:<device>` (the last stream id the device has, contiguously) and
/// `s:<device>` (where a device that became known after others started: entries up to it were
/// never meant for it); a missing field reads `0-0`.
enum UserLogScripts {
    /// Functions every script shares.
    private static let library = """
        local log, ids, cursors, devices, ackedPrefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1]
        local function parse(id)
          local ms, seq = string.match(id, '^(%d+)-(%d+)$')
          return tonumber(ms), tonumber(seq)
        end
        local function after(a, b)
          local am, as = parse(a)
          local bm, bs = parse(b)
          return am > bm or (am == bm and as > bs)
        end
        local function cursor(d) return redis.call('HGET', cursors, 'c:' .. d) or '0-0' end
        local function start(d) return redis.call('HGET', cursors, 's:' .. d) or '0-0' end
        local function received(id, known)
          for _, d in ipairs(known) do
            if (after(id, start(d)) and not after(id, cursor(d))) or redis.call('SISMEMBER', ackedPrefix .. d, id) == 1 then
              return true
            end
          end
          return false
        end
        local function drop(entry, known)
          redis.call('XDEL', log, entry[1])
          if redis.call('HGET', ids, entry[2][4]) == entry[1] then redis.call('HDEL', ids, entry[2][4]) end
          for _, d in ipairs(known) do redis.call('SREM', ackedPrefix .. d, entry[1]) end
        end
        local function advance(d)
          local c, moved = cursor(d), false
          while true do
            local following = redis.call('XRANGE', log, '(' .. c, '+', 'COUNT', 1)[1]
            if not following or redis.call('SREM', ackedPrefix .. d, following[1]) == 0 then break end
            c, moved = following[1], true
          end
          if moved then redis.call('HSET', cursors, 'c:' .. d, c) end
        end
        local function trimDelivered(known)
          if #known == 0 then return end
          local low = nil
          for _, d in ipairs(known) do
            advance(d)
            local c = cursor(d)
            if low == nil or after(low, c) then low = c end
          end
          while true do
            local batch = redis.call('XRANGE', log, '-', low, 'COUNT', 100)
            if #batch == 0 then break end
            for _, entry in ipairs(batch) do drop(entry, known) end
          end
        end
        local function discard(entry, known, out, prefix)
          if not received(entry[1], known) then table.insert(out, prefix .. entry[2][2]) end
          drop(entry, known)
        end
        local function expire(cutoff, known, out, prefix)
          while true do
            local head = redis.call('XRANGE', log, '-', '+', 'COUNT', 1)[1]
            if not head then break end
            local s = tonumber(string.match(head[2][2], '^(%d+) '))
            if s ~= nil and s >= cutoff then break end
            discard(head, known, out, prefix)
          end
        end
        local function makeRoom(cap, known)
          local has = {}
          for _, d in ipairs(known) do
            if after(cursor(d), start(d)) then
              for _, e in ipairs(redis.call('XRANGE', log, '(' .. start(d), cursor(d))) do has[#has + 1] = e end
            end
            for _, id in ipairs(redis.call('SMEMBERS', ackedPrefix .. d)) do
              local e = redis.call('XRANGE', log, id, id)[1]
              if e then has[#has + 1] = e end
            end
          end
          table.sort(has, function(a, b) return after(b[1], a[1]) end)
          for _, e in ipairs(has) do
            if redis.call('XLEN', log) < cap then break end
            if redis.call('HGET', ids, e[2][4]) == e[1] then drop(e, known) end
          end
        end
        local function tidy(known)
          if redis.call('XLEN', log) > 0 then return false end
          redis.call('DEL', log, ids, cursors)
          for _, d in ipairs(known) do redis.call('DEL', ackedPrefix .. d) end
          return true
        end

        """

    /// Every script here: `RedisRelayStore.ping` loads them before the relay serves.
    static var all: [RedisScript] { [store, load, ack, forget] }

    /// ARGV: acked prefix, dedupe key, entry text, cap, key TTL (s), cutoff (ms; older entries
    /// expire). Expires and trims, then appends the entry unless its dedupe key is in the log or
    /// the log holds `cap` entries: then entries some device has go first (oldest first, silently:
    /// their senders heard DELIVERED_FROM_INBOX), and if none is left to go the entry is refused
    /// (what no device has stays). Returns
    /// `{0 stored / 1 duplicate / 2 refused, expired...}`, each expired entry prefixed E;
    /// entries some device received are trimmed without a report.
    static let store = RedisScript(
        library + """
            local known = redis.call('HKEYS', devices)
            if redis.call('EXISTS', log) == 0 then
              redis.call('DEL', ids, cursors)
              for _, d in ipairs(known) do redis.call('DEL', ackedPrefix .. d) end
            end
            local out = {1}
            expire(tonumber(ARGV[6]), known, out, 'E')
            trimDelivered(known)
            if redis.call('HEXISTS', ids, ARGV[2]) == 0 then
              if redis.call('XLEN', log) >= tonumber(ARGV[4]) then makeRoom(tonumber(ARGV[4]), known) end
              if redis.call('XLEN', log) >= tonumber(ARGV[4]) then
                out[1] = 2
              else
                out[1] = 0
                local id = redis.call('XADD', log, '*', 'e', ARGV[3], 'k', ARGV[2])
                redis.call('HSET', ids, ARGV[2], id)
              end
            end
            if not tidy(known) then
              for _, key in ipairs({log, ids, cursors}) do redis.call('EXPIRE', key, ARGV[5]) end
              for _, d in ipairs(known) do redis.call('EXPIRE', ackedPrefix .. d, ARGV[5]) end
            end
            return out
            """)

    /// ARGV: acked prefix, device, cutoff (ms). Discards expired entries, then reads what the
    /// device has not received: the texts of the discarded entries no device received (their
    /// senders are told by the relay), then of every entry after the device's cursor that it
    /// has not acked, oldest first; then, each prefixed `^`, the entries still in the log that
    /// were stored before the device became known (never meant for it: the relay raises the
    /// floor of their streams past them, docs/PROTOCOL.md §6.6).
    static let load = RedisScript(
        library + """
            local known = redis.call('HKEYS', devices)
            local out = {}
            expire(tonumber(ARGV[3]), known, out, '')
            trimDelivered(known)
            if tidy(known) then return out end
            local acked = {}
            for _, id in ipairs(redis.call('SMEMBERS', ackedPrefix .. ARGV[2])) do acked[id] = true end
            for _, entry in ipairs(redis.call('XRANGE', log, '(' .. cursor(ARGV[2]), '+')) do
              if not acked[entry[1]] then table.insert(out, entry[2][2]) end
            end
            if start(ARGV[2]) ~= '0-0' then
              for _, entry in ipairs(redis.call('XRANGE', log, '-', start(ARGV[2]))) do table.insert(out, '^' .. entry[2][2]) end
            end
            return out
            """)

    /// ARGV: acked prefix, device, dedupe key. The device has the entry: its cursor moves past
    /// it (or, beyond the next entry it lacks, the entry joins its acked set), and entries every
    /// device has leave the log. A device that is not known acks only while the user has none.
    /// Returns 1 if the entry was in the log.
    static let ack = RedisScript(
        library + """
            local id = redis.call('HGET', ids, ARGV[3])
            if not id then return 0 end
            local known = redis.call('HKEYS', devices)
            if #known == 0 then known = {ARGV[2]} end
            if redis.call('HEXISTS', devices, ARGV[2]) == 0 and known[1] ~= ARGV[2] then return 0 end
            if after(id, cursor(ARGV[2])) then redis.call('SADD', ackedPrefix .. ARGV[2], id) end
            trimDelivered(known)
            if not tidy(known) then
              local ttl = redis.call('PTTL', log)
              if ttl > 0 then
                redis.call('PEXPIRE', cursors, ttl)
                redis.call('PEXPIRE', ackedPrefix .. ARGV[2], ttl)
              end
            end
            return 1
            """)

    /// ARGV: acked prefix, forgotten devices... Their cursors and acked sets go, and entries the
    /// remaining devices all have leave the log.
    static let forget = RedisScript(
        library + """
            for i = 2, #ARGV do
              redis.call('HDEL', cursors, 'c:' .. ARGV[i], 's:' .. ARGV[i])
              redis.call('DEL', ackedPrefix .. ARGV[i])
            end
            local known = redis.call('HKEYS', devices)
            trimDelivered(known)
            tidy(known)
            return 1
            """)
}
