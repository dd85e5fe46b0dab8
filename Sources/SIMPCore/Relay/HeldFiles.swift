import NIOCore

/// A chunk a sender asked the relay to hold for an offline receiver (FILE_UPLOAD,
/// docs/PROTOCOL.md §5.7): still sealed with the file's key, which the relay never sees.
public struct HeldChunk: Equatable, Sendable {
    /// The file's sender, whose quota the file counts against.
    public var owner: String
    /// The user the file is for (only this user may fetch it).
    public var recipient: String
    public var fileId: UInt64
    public var index: UInt64
    /// The transmission's number (`fileSeq`), echoed as the newest in the relay's FILE_ACK.
    public var number: UInt64
    /// The file's size and plaintext bytes per chunk, as the upload declared them.
    public var fileSize: UInt64
    public var chunkSize: UInt32
    /// The sealed chunk (ciphertext ‖ tag).
    public var sealed: [UInt8]

    public init(
        owner: String, recipient: String, fileId: UInt64, index: UInt64, number: UInt64, fileSize: UInt64, chunkSize: UInt32, sealed: [UInt8]
    ) {
        self.owner = owner
        self.recipient = recipient
        self.fileId = fileId
        self.index = index
        self.number = number
        self.fileSize = fileSize
        self.chunkSize = chunkSize
        self.sealed = sealed
    }

    /// How many chunks the file has.
    public var chunkCount: UInt64 { FileSender.chunkCount(size: fileSize, chunkSize: Int(chunkSize)) }
}

/// What the store did with a `HeldChunk`.
public enum HeldChunkResult: Equatable, Sendable {
    /// Kept; `complete` once the store holds every chunk of the file.
    case held(complete: Bool)
    /// Not kept: the file would take its sender past the relay's quota (the text says which).
    case refused(String)
}

/// A receiver's FILE_FETCH: chunks `indices` of file `fileId` from `owner`, to be sent to
/// `recipient`'s session `session`.
public struct HeldFileFetch: Equatable, Sendable {
    public var owner: String
    public var recipient: String
    public var fileId: UInt64
    public var session: UInt64
    public var indices: [UInt64]

    public init(owner: String, recipient: String, fileId: UInt64, session: UInt64, indices: [UInt64]) {
        self.owner = owner
        self.recipient = recipient
        self.fileId = fileId
        self.session = session
        self.indices = indices
    }
}

/// How long a relay keeps a held file after its last chunk was written, unless its operator
/// says otherwise (`--file-store-retention`; docs/PROTOCOL.md §5.7). A client keeping the ids
/// of files the relay held (to forward them with FILE_GRANT) forgets them after it.
public enum HeldFileRetention {
    /// 7 days.
    public static let defaultSeconds = 7 * 24 * 3600
}

/// A sender's FILE_GRANT: file `fileId` of `owner`, held whole for another receiver, may be
/// fetched by `recipient` too; answered to `owner`'s session `session`.
public struct HeldFileGrant: Equatable, Sendable {
    public var owner: String
    public var recipient: String
    public var fileId: UInt64
    public var session: UInt64

    public init(owner: String, recipient: String, fileId: UInt64, session: UInt64) {
        self.owner = owner
        self.recipient = recipient
        self.fileId = fileId
        self.session = session
    }
}

extension HeldFileGrant {
    /// The most receivers a held file may be granted to (besides its first): with the quota
    /// counting each grant's bytes, this bounds what a sender of a tiny file can make the store keep.
    public static let maxPerFile = 64
    /// The refusal of a grant past `maxPerFile`.
    public static let tooManyText = "a file the relay holds may be granted to at most \(maxPerFile) further receivers"
}

/// What the store did with a `HeldFileGrant`.
public enum HeldFileGrantResult: Equatable, Sendable {
    /// The recipient may fetch the file (granted now or before, or it is the file's receiver): its chunk count.
    case granted(chunks: UInt64)
    /// The owner has no such file held whole (never uploaded, expired, released, or still uploading).
    case notHeld
    /// Not granted: it would take the owner past the relay's quota (the text says which).
    case refused(String)
}

/// The uploads the relay is taking for offline receivers: which chunks of each it has stored,
/// so its FILE_ACKs tell the sender what to send again (the store decides when a file is
/// complete; this is only for the acknowledgements). Bounded: the least recently heard upload
/// is forgotten first, after which its sender sends what it lacks again.
struct HeldUploads: Sendable {
    private struct Key: Hashable {
        var owner: String
        var fileId: UInt64
    }

    private struct Upload {
        var stored = ChunkRanges()
        var newest: UInt64 = 0
        var heard: NIODeadline
    }

    /// The relay's instance in its FILE_ACKs (`stream`): a restarted relay's acknowledgements
    /// replace what its earlier life acknowledged.
    let instance: UInt64
    let maxUploads: Int
    private var uploads: [Key: Upload] = [:]

    init(instance: UInt64, maxUploads: Int = 4096) {
        self.instance = instance
        self.maxUploads = maxUploads
    }

    /// The store kept `chunk`: the chunks of its file stored so far, and the newest transmission number.
    mutating func stored(_ chunk: HeldChunk, now: NIODeadline) -> (stored: ChunkRanges, newest: UInt64) {
        let key = Key(owner: chunk.owner, fileId: chunk.fileId)
        if uploads[key] == nil, uploads.count >= maxUploads, let oldest = uploads.min(by: { $0.value.heard < $1.value.heard })?.key {
            uploads[oldest] = nil
        }
        var upload = uploads[key] ?? Upload(heard: now)
        upload.stored.insert(chunk.index)
        upload.newest = max(upload.newest, chunk.number)
        upload.heard = now
        uploads[key] = upload
        return (upload.stored, upload.newest)
    }

    /// The file is complete in the store: nothing more to track.
    mutating func finished(owner: String, fileId: UInt64) { uploads[Key(owner: owner, fileId: fileId)] = nil }

    /// Uploads being tracked.
    var count: Int { uploads.count }
}
