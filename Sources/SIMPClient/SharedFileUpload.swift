import SIMPCore

/// One upload of a file to the relay shared by the transfers of one room send
/// (`RoomFileSend`, docs/PROTOCOL.md §5.6 "Files in rooms"): every member's announcement
/// carries the same `fileId` and `key`, so the relay needs the ciphertext once. The first
/// transfer whose announcement the relay stored (its member is offline, or has several
/// devices) uploads the file (FILE_UPLOAD); the others whose announcements were stored wait
/// until the relay holds it whole and then grant it to their member (FILE_GRANT), as a
/// forward of a held file does. Members online get it live as before, under the same id and
/// key. The key still travels only inside each member's end-to-end announcement.
public actor SharedFileUpload {
    /// The file's id and key in every member's announcement.
    public nonisolated let fileId: UInt64
    public nonisolated let key: [UInt8]

    private enum State {
        case open
        case uploading
        case held
        /// The upload did not leave the whole file on the relay: why.
        case failed(String)
    }

    private var state = State.open
    private var waiting: [CheckedContinuation<String?, Never>] = []

    /// A new id and key (random).
    public init() {
        var random = SystemRandomNumberGenerator()
        fileId = UInt64.random(in: 1...UInt64.max, using: &random)
        key = FileChunkCipher.newKey(using: &random)
    }

    /// Whether the asking transfer is to upload the file: true for the first to ask, false
    /// once another has (it uploads, the relay holds the file, or the upload failed: the
    /// relay may keep its first chunks under this id for that member, so no other member
    /// uploads it again under the same id).
    func claimUpload() -> Bool {
        guard case .open = state else { return false }
        state = .uploading
        return true
    }

    /// Waits until the upload under way is over: nil once the relay holds the whole file, or
    /// why it does not.
    func heldWhole() async -> String? {
        switch state {
        case .held: return nil
        case .failed(let why): return why
        case .open: return "nothing was uploaded"
        case .uploading: return await withCheckedContinuation { waiting.append($0) }
        }
    }

    /// The uploading transfer is over: `failure` nil when the relay holds the whole file.
    func uploadEnded(failure: String?) {
        state = failure.map { .failed($0) } ?? .held
        let waiters = waiting
        waiting = []
        for waiter in waiters { waiter.resume(returning: failure) }
    }
}
