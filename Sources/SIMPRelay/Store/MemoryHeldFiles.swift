import SIMPCore

/// Files held for offline receivers in `InMemoryRelayStore`, with the answers of
/// `HeldFileStore` (quota per sender, retention after the last chunk, deleted once every
/// known receiving device of the receiver has the file).
struct MemoryHeldFiles: Sendable {
    private struct File {
        var recipient: String
        var size: UInt64
        var chunkCount: UInt64
        var chunks: [UInt64: [UInt8]] = [:]
        var done: Set<String> = []
        /// ms since the epoch.
        var expires: Int64
    }

    /// sender → file id → file.
    private var files: [String: [UInt64: File]] = [:]

    /// Keeps `chunk` unless its file is new and would take its sender past `maxBytesPerUser`.
    mutating func hold(_ chunk: HeldChunk, maxBytesPerUser: UInt64, retentionMillis: Int64, now: Int64) -> HeldChunkResult {
        expire(chunk.owner, now: now)
        if let file = files[chunk.owner]?[chunk.fileId] {
            guard file.recipient == chunk.recipient else { return .refused("file id \(chunk.fileId) is held for another receiver") }
        } else {
            let used = (files[chunk.owner] ?? [:]).values.reduce(0) { $0 + $1.size }
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
        guard let file = files[fetch.owner]?[fetch.fileId], file.recipient == fetch.recipient else { return nil }
        return fetch.indices.reduce(into: [:]) { chunks, index in chunks[index] = file.chunks[index] }
    }

    /// `device` of the file's recipient has it; deleted once every one of `devices` has.
    mutating func release(owner: String, fileId: UInt64, recipient: String, device: String, devices: [String]) {
        guard var file = files[owner]?[fileId], file.recipient == recipient else { return }
        file.done.insert(device)
        files[owner]?[fileId] = devices.allSatisfy(file.done.contains) ? nil : file
    }

    /// Whether the store holds file `fileId` of `owner` (for tests).
    func holds(owner: String, fileId: UInt64) -> Bool { files[owner]?[fileId] != nil }

    private mutating func expire(_ owner: String, now: Int64) {
        files[owner] = files[owner]?.filter { $0.value.expires > now }
    }
}
