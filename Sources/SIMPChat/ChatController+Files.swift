import Foundation
import NIOConcurrencyHelpers
import NIOCore
import SIMPClient
import SIMPCore

/// The file transfers of `simp chat`: files to send looked at and sent (`FileSend`, one task
/// each, several at once), files received saved (`FileDownloads`), the client's file datagrams
/// shared between them (`FileDatagramRouter`).
extension ChatController {
    /// Starts receiving files (end to end only: a file's key travels in its announcement);
    /// returns what to tell the user if files cannot be received.
    func startFiles() -> String? {
        guard client.configuration.endToEnd != nil else { return nil }
        let router = FileDatagramRouter(client: client)
        fileRouter = router
        let directory = options.downloads ?? SIMPHome.directory().appendingPathComponent("downloads").path
        let post = self.post
        do {
            let downloads = try FileDownloads(
                client: client, directory: directory,
                saved: { saved in
                    let file = ChatFile(
                        path: saved.path, name: saved.name, size: saved.size, image: ImageDimensions(path: saved.path), sha256: saved.sha256,
                        room: saved.room.isEmpty ? nil : saved.room)
                    post.yield(.fileSaved(from: saved.from, file, receivedBefore: saved.receivedBefore))
                },
                failed: { post.yield(.fileNotReceived($0)) })
            self.downloads = downloads
            Task { await downloads.run(datagrams: router.chunks) }
            return nil
        } catch {
            return "files sent to you cannot be received: cannot use \(directory) (\(error.localizedDescription))"
        }
    }

    /// Sends `file` to `peer` (a person or `#room`), posting its progress and its outcome for
    /// message line `ref`.
    func startFileSend(ref: Int, _ file: ChatFile, to peer: String) {
        if RelayCore.isRoomAddress(peer) { return startRoomFileSend(ref: ref, file, to: String(peer.dropFirst())) }
        Task { [client, post, fileRouter] in
            let started = NIODeadline.now()
            do {
                let transfer = try FileSend(client: client, path: file.path, to: peer)
                let heldAs = NIOLockedValueBox<UInt64?>(nil)
                try await transfer.run(datagrams: fileRouter?.acknowledgements()) { progress in
                    heldAs.withLockedValue { $0 = progress.heldByRelay ? progress.fileId : nil }
                    post.yield(.fileProgress(ref: ref, progress.line))
                }
                let millis = Double((NIODeadline.now() - started).nanoseconds) / 1e6
                // A receiver who is offline gets the file from the relay later: stored, not
                // delivered, until the relay says a device of the receiver has it.
                if let fileId = heldAs.withLockedValue({ $0 }) {
                    post.yield(.fileStored(ref: ref, fileId: fileId))
                } else {
                    post.yield(.resolved(ref: ref, .delivered(latencyMillis: millis)))
                }
            } catch {
                post.yield(.resolved(ref: ref, .failed("\(error)")))
            }
        }
    }

    /// Sends `file` to each member of `room` who reads its posts (`RoomFileSend`): the mark is
    /// the summed progress, then the members who have the whole file (✓ 1/2, ✓✓ 2/2), a member
    /// the relay holds it for counted once a device of that member fetched it; a member
    /// who could not get it is named with the reason.
    func startRoomFileSend(ref: Int, _ file: ChatFile, to room: String) {
        Task { [client, post, fileRouter] in
            let last = NIOLockedValueBox<RoomFileSend.Progress?>(nil)
            do {
                let failures = try await RoomFileSend(client: client, path: file.path, room: room, router: fileRouter).run { progress in
                    last.withLockedValue { $0 = progress }
                    post.yield(.fileProgress(ref: ref, progress.total.line))
                }
                for failure in failures { post.yield(.log("\(file.name) not sent to \(failure.member) in #\(room): \(failure.reason)")) }
                let (members, held) = last.withLockedValue { ($0?.members ?? 0, $0?.heldFor ?? [:]) }
                if members == 0 {
                    post.yield(.resolved(ref: ref, .noOtherMembers))
                } else {
                    // Members the relay holds it for count once their devices have it.
                    post.yield(.roomFileHeld(ref: ref, heldFor: held, delivered: members - failures.count - held.count, of: members))
                }
            } catch {
                post.yield(.resolved(ref: ref, .failed("\(error)")))
            }
        }
    }

    /// The entries of the directory `typed` (`""`: the current one; `~/` is the home),
    /// directories with `/` after their name, for Tab after `/file `.
    static func directoryEntries(_ typed: String) -> [String]? {
        let path = typed.isEmpty ? "." : typed.hasPrefix("~/") || typed == "~" ? NSString(string: typed).expandingTildeInPath : typed
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return nil }
        return names.map { name in
            var isDirectory: ObjCBool = false
            FileManager.default.fileExists(atPath: (path as NSString).appendingPathComponent(name), isDirectory: &isDirectory)
            return isDirectory.boolValue ? name + "/" : name
        }
    }

    /// The file at `typed` (`~/` is the home directory) as it can be sent, or why it cannot:
    /// missing, a directory, unreadable, empty, not an image for `/image`, or no end to end
    /// encryption to carry its key.
    static func look(at typed: String, image: Bool, client: SIMPClient) -> Result<ChatFile, ChatRoomError> {
        let path = typed.hasPrefix("~/") ? NSString(string: typed).expandingTildeInPath : typed
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            return .failure(ChatRoomError("no such file: \(path)"))
        }
        guard !isDirectory.boolValue else { return .failure(ChatRoomError("\(path) is a directory: /file sends one file")) }
        guard FileManager.default.isReadableFile(atPath: path) else { return .failure(ChatRoomError("cannot read \(path): permission denied")) }
        guard client.configuration.endToEnd != nil else { return .failure(ChatRoomError("\(FileSend.Failure.notEndToEnd)")) }
        let size = ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.uint64Value ?? 0
        guard size > 0 else { return .failure(ChatRoomError("\(path) is empty: nothing to send")) }
        let name = URL(fileURLWithPath: path).lastPathComponent
        guard image else { return .success(ChatFile(path: path, name: name, size: size)) }
        guard let dimensions = ImageDimensions(path: path) else {
            return .failure(ChatRoomError("\(name) is not a PNG, JPEG or GIF image: /file \(typed) sends it as a file"))
        }
        return .success(ChatFile(path: path, name: name, size: size, image: dimensions))
    }
}
