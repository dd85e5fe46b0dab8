import Foundation
import NIOConcurrencyHelpers
import NIOCore
import SIMPCore

/// Sends one file to a room (docs/PROTOCOL.md §5.6, "Files in rooms"): to each member this
/// device would seal a room post for (those admitted, `RoomAdmission`; not this user), one
/// `FileSend` each, all at once, under one file id and key (`SharedFileUpload`). Each member
/// gets its own announcement; a member online gets its own live chunk stream; for the members
/// whose announcements the relay stored (offline, or several devices) the file is uploaded
/// once and granted to the others. The announcement names the
/// room inside its end-to-end plaintext (`fileRoom`), so members show it as a room file and the
/// relay does not learn the room (docs/E2E.md §17). A member who is offline or
/// refuses is reported and does not stop the others.
public struct RoomFileSend: Sendable {
    /// How far the whole send is: the members' progress summed, and who has the whole file.
    public struct Progress: Sendable {
        /// The members' transfers summed (`size` is the file's size times the members; a
        /// member granted the room's one upload counts as acknowledged whole, having cost nothing).
        public var total: FileSend.Progress
        public var membersDone: Int
        public var members: Int
        /// Of `membersDone`, those for whom the relay holds the file (offline, or with several
        /// devices), with the file's id there: their devices get it from the relay, which tells
        /// the sender when each device has it (`fileReceived`, naming that id, docs/PROTOCOL.md §5.7).
        public var heldFor: [String: UInt64] = [:]
        /// How many members the relay holds the file for.
        public var membersHeld: Int { heldFor.count }
    }

    public let client: SIMPClient
    public let path: String
    public let room: String
    /// Where the transfers' acknowledgements come from (nil: a router made for this send).
    public let router: FileDatagramRouter?

    public init(client: SIMPClient, path: String, room: String, router: FileDatagramRouter? = nil) {
        self.client = client
        self.path = path
        self.room = room
        self.router = router
    }

    /// Sends the file to every reader of the room; returns who could not get it and why
    /// (empty: everyone has it). `progress` hears of each step, from any task.
    public func run(progress: @escaping @Sendable (Progress) -> Void) async throws -> [(member: String, reason: String)] {
        let members = try await client.fileReaders(ofRoom: room)
        let router = self.router ?? FileDatagramRouter(client: client)
        defer { if self.router == nil { router.stop() } }
        let state = NIOLockedValueBox<(each: [String: FileSend.Progress], done: Int)>(([:], 0))
        let path = self.path, client = self.client, room = self.room
        let shared = SharedFileUpload()
        let finished = NIOLockedValueBox<Set<String>>([])
        @Sendable func report() {
            let (each, done) = state.withLockedValue { ($0.each, $0.done) }
            var held: [String: UInt64] = [:]
            var total = FileSend.Progress(bytesAcknowledged: 0, size: 0, bytesSent: 0, elapsed: .zero)
            for one in each.values {
                total.bytesAcknowledged += one.forwarded ? one.size : one.bytesAcknowledged
                total.size += one.size
                total.bytesSent += one.bytesSent
                total.bytesHeldBefore += one.bytesHeldBefore
                total.elapsed = max(total.elapsed, one.elapsed)
            }
            for (member, one) in each where one.heldByRelay && finished.withLockedValue({ $0.contains(member) }) { held[member] = one.fileId }
            progress(Progress(total: total, membersDone: done, members: members.count, heldFor: held))
        }
        report()
        return await withTaskGroup(of: (String, String?).self) { group in
            for member in members {
                group.addTask {
                    do {
                        let transfer = try FileSend(client: client, path: path, to: member, room: room, shared: shared)
                        try await transfer.run(datagrams: router.acknowledgements()) { one in
                            state.withLockedValue { $0.each[member] = one }
                            report()
                        }
                        finished.withLockedValue { _ = $0.insert(member) }
                        state.withLockedValue { $0.done += 1 }
                        report()
                        return (member, nil)
                    } catch {
                        return (member, "\(error)")
                    }
                }
            }
            var failures: [(member: String, reason: String)] = []
            for await (member, failure) in group {
                if let failure { failures.append((member, failure)) }
            }
            return failures.sorted { $0.member < $1.member }
        }
    }
}

extension SIMPClient {
    /// `message` (a file's announcement) with its room kept only when the relay lists both this
    /// user and its sender as members of that room; otherwise (a forged or stale room name, or
    /// the relay cannot be asked) the room is dropped and the file shows as a direct file.
    public func checkingFileRoom(_ message: SIMPMessage) async -> SIMPMessage {
        guard !message.fileRoom.isEmpty else { return message }
        let members = try? await roomMembers(message.fileRoom)
        return message.withFileRoomChecked(members: members, user: configuration.user)
    }

    /// The members of `room` a file sent there goes to: those this device seals room posts
    /// for (admitted by a member; all of them the first time this device uses the room), not
    /// this user. Throws without end to end (a file's key travels end to end only).
    public func fileReaders(ofRoom room: String) async throws -> [String] {
        let members = try await roomMembers(room)
        return try await onEngine(now: { engine in
            guard let endToEnd = engine.endToEnd else { throw FileSend.Failure.notEndToEnd }
            return endToEnd.usedRoom(room, members: members).readers(among: members)
        })
    }
}
