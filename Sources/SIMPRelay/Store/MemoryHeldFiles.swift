import SIMPCore

/// Files held for offline receivers in `InMemoryRelayStore`, with the answers of
/// `HeldFileStore` (quota per sender, grants to further receivers counted again, retention
/// after the last chunk, deleted once every known receiving device of each receiver has the file).
struct MemoryHeldFiles: Sendable {
    private struct File {
        var recipient: String
        var size: UInt64
        var chunkCount: UInt64
        var chunks: [UInt64: [UInt8]] = [:]
        /// The receivers the sender granted the file to, besides `recipient`.
        var grantees: Set<String> = []
        /// (receiver, device) that have the whole file.
        var done: Set<[String]> = []
        /// Receivers all of whose devices have it.
        var finished: Set<String> = []
        /// ms since the epoch.
        var expires: Int64

        func receives(_ user: String) -> Bool { user == recipient || grantees.contains(user) }
        /// Bytes counted against the sender's quota: the file once per receiver.
        var quotaBytes: UInt64 { size * UInt64(1 + grantees.count) }
    }

    /// sender → file id → file.
    private var files: [String: [UInt64: File]] = [:]

    /// Keeps `chunk` unless its file is new and would take its sender past `maxBytesPerUser`.
    mutating func hold(_ chunk: HeldChunk, maxBytesPerUser: UInt64, retentionMillis: Int64, now: Int64) -> HeldChunkResult {
        expire(chunk.owner, now: now)
        if let file = files[chunk.owner]?[chunk.fileId] {
            guard file.recipient == chunk.recipient else { return .refused("file id \(chunk.fileId) is held for another receiver") }
        } else {
            let used = usedBytes(chunk.owner)
            guard used + chunk.fileSize <= maxBytesPerUser else {
                return .refused(HeldFileStore.quotaText(used: used, size: chunk.fileSize, limit: maxBytesPerUser))
            }
            files[chunk.owner, default: [:]][chunk.fileId] = File(
                recipient: chunk.recipient, size: chunk.fileSize, chunkCount: chunk.chunkCount, expires: now + retentionMillis)
        }
        files[chunk.owner]?[chunk.fileId]?.chunks[chunk.index] = chunk.sealed
        files[chunk.owner]?[chunk.fileId]?.expires = now + retentionMillis
        let file = files[chunk.owner]![chunk.fileId]!
        return .held(complete: UInt64(file.chunks.count) >= file.chunkCount)
    }

    /// The chunks `fetch` asks for that are held (nil: no such file for its recipient).
    mutating func fetch(_ fetch: HeldFileFetch, now: Int64) -> [UInt64: [UInt8]]? {
        expire(fetch.owner, now: now)
        guard let file = files[fetch.owner]?[fetch.fileId], file.receives(fetch.recipient) else { return nil }
        return fetch.indices.reduce(into: [:]) { chunks, index in chunks[index] = file.chunks[index] }
    }

    /// `device` of one of the file's receivers has it; deleted once every one of that
    /// receiver's `devices` has, and every other receiver finished too.
    /// Returns whether `device` said so for the first time.
    mutating func release(owner: String, fileId: UInt64, recipient: String, device: String, devices: [String]) -> Bool {
        guard var file = files[owner]?[fileId], file.receives(recipient) else { return false }
        let firstTime = file.done.insert([recipient, device]).inserted
        if devices.allSatisfy({ file.done.contains([recipient, $0]) }) { file.finished.insert(recipient) }
        let everyone = file.grantees.union([file.recipient])
        files[owner]?[fileId] = everyone.isSubset(of: file.finished) ? nil : file
        return firstTime
    }

    /// Lets `grant.recipient` fetch the file too, if it is held whole, within the quota.
    mutating func grant(_ grant: HeldFileGrant, maxBytesPerUser: UInt64, now: Int64) -> HeldFileGrantResult {
        expire(grant.owner, now: now)
        guard let file = files[grant.owner]?[grant.fileId], UInt64(file.chunks.count) >= file.chunkCount else { return .notHeld }
        if file.receives(grant.recipient) { return .granted(chunks: file.chunkCount) }
        guard file.grantees.count < HeldFileGrant.maxPerFile else { return .refused(HeldFileGrant.tooManyText) }
        let used = usedBytes(grant.owner)
        guard used + file.size <= maxBytesPerUser else {
            return .refused(HeldFileStore.quotaText(used: used, size: file.size, limit: maxBytesPerUser))
        }
        files[grant.owner]?[grant.fileId]?.grantees.insert(grant.recipient)
        return .granted(chunks: file.chunkCount)
    }

    /// Whether the store holds file `fileId` of `owner` (for tests).
    func holds(owner: String, fileId: UInt64) -> Bool { files[owner]?[fileId] != nil }

    private func usedBytes(_ owner: String) -> UInt64 { (files[owner] ?? [:]).values.reduce(0) { $0 + $1.quotaBytes } }

    private mutating func expire(_ owner: String, now: Int64) {
        files[owner] = files[owner]?.filter { $0.value.expires > now }
    }
}
