import Foundation
import NIOConcurrencyHelpers
import NIOCore
import SIMPClient
import SIMPCore
import SIMPLocalServers
import SIMPRelay
import SIMPTestSupport
import XCTest

/// A file for a receiver who is offline (docs/PROTOCOL.md §5.7), with real `simp` processes, a
/// real relay and Redis: alice's `simp send --file` uploads it to the relay and exits; bob's
/// `simp listen` started later fetches it, checks its digest and saves it; the relay then
/// deletes its copy. The same for a receiver with one device online and one offline.
final class OfflineFileProcessTests: StoryProcessTestCase {
    /// FILE_FETCH requests for chunks that reached the relay's store, by the file's sender.
    private let fetches = NIOLockedValueBox<[String: Int]>([:])
    /// Uploaded chunks the relay asked its store to keep, by the file's sender.
    private let uploads = NIOLockedValueBox<[String: Int]>([:])

    /// When the store first granted a held file to a further receiver.
    private let granted = NIOLockedValueBox<NIODeadline?>(nil)

    override func makeRelayStore(_ configuration: RelayConfiguration) -> (any RelayStore)? {
        FetchCountingStore(
            wrapping: RedisRelayStore(endpoint: configuration.redisEndpoint, logger: configuration.logger), fetches: fetches, uploads: uploads,
            granted: granted, lastChunkDelay: name.contains("Promptly") ? .seconds(12) : nil)
    }

    override func configureRelay(_ configuration: inout RelayConfiguration) {
        if name.contains("OverTheRelaysLimit") { configuration.heldFileMaxBytes = 1_000_000 }
    }

    func testAFileSentWhileTheReceiverIsOfflineReachesItWhenItConnectsAndLeavesRedis() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let downloads = home.appendingPathComponent("downloads-\(bob)")
        try await registerThenGoOffline(bob, into: downloads)
        let (contents, send) = try await sendFile(megabytes: 3, from: alice, to: bob)
        let status = await send.exitStatus(timeout: 300)
        XCTAssertEqual(status, 0, send.standardError)
        XCTAssertTrue(send.standardOutput.contains("stored on the relay"), send.standardOutput + send.standardError)
        print("offline file upload: \(send.standardOutput)")
        let held = try await heldFileKeys(of: alice)
        XCTAssertEqual(held.count, 2, "the file and its chunks are held: \(held)")
        // What Redis holds is the sealed chunk (ciphertext ‖ tag), not the file's bytes.
        let first = try await relay.inspector.command(["HGET", held.first { $0.hasSuffix(":chunks") } ?? "", "0"]).bytes ?? []
        XCTAssertEqual(first.count, FileSend.chunkSize + FileChunkCipher.overhead)
        XCTAssertNotEqual(Array(first.prefix(FileSend.chunkSize)), Array(contents.prefix(FileSend.chunkSize)))

        let listening = try await listen(bob, into: downloads)
        await assertSaves(listening, contents, into: downloads)
        await assertHeldFilesGo(of: alice, "still held after bob's only device has it")
        XCTAssertGreaterThan(fetches.withLockedValue { $0[alice] ?? 0 }, 0, "bob's device asked the relay for the chunks")
    }

    /// bob's one device is online: the file goes live from alice, and bob's device asks the
    /// relay for a held copy at most once, on the announcement (answered FILE_NOT_HELD), not
    /// again and again while alice's chunks flow (before: 0.6 s later, then 1.8 s, 4.2 s, …).
    func testALiveTransferToTheOneDeviceOnlineAsksTheRelayAtMostOnce() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let downloads = home.appendingPathComponent("downloads-\(bob)")
        let listening = try await listen(bob, into: downloads)
        let started = NIODeadline.now()
        let (contents, send) = try await sendFile(megabytes: 8, from: alice, to: bob)
        let status = await send.exitStatus(timeout: 300)
        XCTAssertEqual(status, 0, send.standardError)
        XCTAssertFalse(send.standardOutput.contains("stored on the relay"), "live, not held: \(send.standardOutput)")
        await assertSaves(listening, contents, into: downloads)
        let seconds = Double((NIODeadline.now() - started).nanoseconds) / 1e9
        let asked = fetches.withLockedValue { $0[alice] ?? 0 }
        print("live transfer of 8 MB in \(String(format: "%.1f", seconds)) s: \(asked) FILE_FETCH to the relay")
        XCTAssertLessThanOrEqual(asked, 1)
    }

    func testAFileOverTheRelaysLimitIsRefusedWithTheReasonAndNothingIsKept() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        try await registerThenGoOffline(bob, into: home.appendingPathComponent("downloads-\(bob)"))
        let (_, send) = try await sendFile(megabytes: 2, from: alice, to: bob)
        let status = await send.exitStatus(timeout: 300)
        XCTAssertEqual(status, 1, send.standardOutput + send.standardError)
        XCTAssertTrue(
            send.standardError.contains(
                "the relay will not hold the file: this relay holds files of at most 1000000 bytes for receivers who are offline; this one has 2000000"
            ),
            send.standardError)
        let held = try await heldFileKeys(of: alice)
        XCTAssertEqual(held, [])
    }

    /// bob has two devices: his phone listens, his laptop is offline. alice's upload reaches the
    /// phone as the relay stores it; the laptop's next `simp listen` gets the whole file; the
    /// relay keeps its copy until both said they have it.
    func testAFileReachesTheDeviceOnlineAtOnceAndTheOneOfflineWhenItConnects() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let phone = try await phoneOnlineLaptopOffline(bob)

        let (contents, send) = try await sendFile(megabytes: 3, from: alice, to: bob)
        let status = await send.exitStatus(timeout: 300)
        XCTAssertEqual(status, 0, send.standardError)
        XCTAssertTrue(send.standardOutput.contains("for \(bob)'s devices: those online get it now"), send.standardOutput + send.standardError)
        print("file to a device online and one offline: \(send.standardOutput)")
        await assertSaves(phone, contents, into: phoneDownloads)
        try await Task.sleep(nanoseconds: 500_000_000) // the phone's release reaches the store
        let held = try await heldFileKeys(of: alice)
        XCTAssertEqual(held.count, 2, "kept for the laptop after the phone has it: \(held)")

        let listening = try await listen(bob, device: "laptop", into: laptopDownloads)
        await assertSaves(listening, contents, into: laptopDownloads)
        await assertHeldFilesGo(of: alice, "still held after both of bob's devices have it")
    }

    /// The relay will not hold the file (over its limit) while bob's phone is online and his
    /// laptop offline: it goes live to the phone, and alice is told the laptop will not get it.
    func testAFileOverTheRelaysLimitGoesLiveToTheDeviceOnlineOnly() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let phone = try await phoneOnlineLaptopOffline(bob)
        let (contents, send) = try await sendFile(megabytes: 2, from: alice, to: bob)
        let status = await send.exitStatus(timeout: 300)
        XCTAssertEqual(status, 0, send.standardError)
        XCTAssertTrue(
            send.standardError.contains(
                "the relay will not hold offline.bin for \(bob)'s devices offline (this relay holds files of at most 1000000 bytes"),
            send.standardError)
        XCTAssertTrue(send.standardOutput.contains("delivered to \(bob)"), send.standardOutput)
        await assertSaves(phone, contents, into: phoneDownloads)
        let held = try await heldFileKeys(of: alice)
        XCTAssertEqual(held, [])
    }

    private var phoneDownloads: URL { home.appendingPathComponent("downloads-phone") }
    private var laptopDownloads: URL { home.appendingPathComponent("downloads-laptop") }

    /// `user`'s phone (which makes the user key) approves the laptop, which then goes offline;
    /// the phone listens again: returns it.
    private func phoneOnlineLaptopOffline(_ user: String) async throws -> ChildProcess {
        try await registerThenGoOffline(user, into: phoneDownloads)
        let laptop = try await listen(user, device: "laptop", into: laptopDownloads)
        let shown = await Eventually.holds(within: .seconds(15)) { laptop.standardError.contains("its device code is ") }
        XCTAssertTrue(shown, laptop.standardError)
        let code = String(laptop.standardError.components(separatedBy: "its device code is ").last?.prefix(17) ?? "")
        let approve = try ChildProcess(
            "simp", ["devices", "approve", "laptop", "--device", "phone", "--code", code, "--server", "127.0.0.1:\(relay.port)", "--user", user],
            environment: try await environment(user))
        children.append(approve)
        let approved = await approve.exitStatus()
        XCTAssertEqual(approved, 0, approve.standardError)
        laptop.signal(SIGTERM)
        _ = await laptop.exitStatus(timeout: 10)
        return try await listen(user, device: "phone", into: phoneDownloads)
    }

    /// alice sends a file to bob, who is offline, then the same file to carol: the second time
    /// it is forwarded from the relay's copy (granted, announced, nothing uploaded); carol's
    /// `simp listen` gets it, then bob's; the copy goes once both have it.
    func testTheSameFileToASecondPersonIsForwardedFromTheRelaysCopy() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob"), carol = TestRelay.uniqueUser("carol")
        let bobDownloads = home.appendingPathComponent("downloads-bob"), carolDownloads = home.appendingPathComponent("downloads-carol")
        try await registerThenGoOffline(bob, into: bobDownloads)
        try await registerThenGoOffline(carol, into: carolDownloads)
        let (contents, first) = try await sendFile(megabytes: 2, from: alice, to: bob)
        let uploaded = await first.exitStatus(timeout: 300)
        XCTAssertEqual(uploaded, 0, first.standardError)
        let (_, second) = try await sendFile(megabytes: 2, from: alice, to: carol)
        let forwarded = await second.exitStatus(timeout: 60)
        XCTAssertEqual(forwarded, 0, second.standardError)
        XCTAssertTrue(second.standardOutput.contains("forwarded from the relay's copy"), second.standardOutput + second.standardError)
        XCTAssertTrue(second.standardError.contains("sent 0 bytes for \(contents.count)"), "nothing uploaded again: " + second.standardError)
        print("forwarded: \(second.standardOutput)")

        let carols = try await listen(carol, into: carolDownloads)
        await assertSaves(carols, contents, into: carolDownloads)
        try await Task.sleep(nanoseconds: 500_000_000) // carol's release reaches the store
        let held = try await heldFileKeys(of: alice)
        XCTAssertEqual(held.count, 2, "kept for bob: \(held)")
        let bobs = try await listen(bob, into: bobDownloads)
        await assertSaves(bobs, contents, into: bobDownloads)
        await assertHeldFilesGo(of: alice, "still held after bob and carol have it")
    }

    /// bob is offline: `simp send --file --wait-received` says on standard error that the relay
    /// holds the file and waits; once bob's `simp listen` saved it, alice's send prints the ✓✓
    /// line and exits 0. The relay kept the news for alice too: her `simp listen --json` prints
    /// it as a `fileReceived` event naming the file (before: nothing but `simp chat` showed it).
    func testTheSenderHearsWhenTheReceiverGotAHeldFile() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let downloads = home.appendingPathComponent("downloads-\(bob)")
        try await registerThenGoOffline(bob, into: downloads)
        let (contents, send) = try await sendFile(megabytes: 1, from: alice, to: bob, extra: ["--wait-received"])
        let waits = await Eventually.holds(within: .seconds(120)) { send.standardError.contains("is held by the relay for \(bob); waiting") }
        XCTAssertTrue(waits, send.standardOutput + send.standardError)
        XCTAssertTrue(send.standardOutput.contains("stored on the relay"), send.standardOutput)
        let listening = try await listen(bob, into: downloads)
        await assertSaves(listening, contents, into: downloads)
        let status = await send.exitStatus(timeout: 30)
        XCTAssertEqual(status, 0, send.standardError)
        XCTAssertTrue(send.standardOutput.contains("✓✓ file offline.bin (id "), send.standardOutput)
        XCTAssertTrue(send.standardOutput.contains("reached \(bob)'s device phone"), send.standardOutput)

        let alices = try ChildProcess(
            "simp", ["listen", "--server", "127.0.0.1:\(relay.port)", "--user", alice, "--json"], environment: try await environment(alice))
        children.append(alices)
        let told = await Eventually.holds(within: .seconds(15)) { alices.standardOutput.contains("fileReceived") }
        XCTAssertTrue(told, alices.standardOutput + alices.standardError)
        let event = alices.standardOutput.split(separator: "\n").first { $0.contains("fileReceived") }.flatMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        XCTAssertEqual(event?["event"] as? String, "fileReceived")
        XCTAssertEqual(event?["name"] as? String, "offline.bin")
        XCTAssertEqual(event?["user"] as? String, bob)
        XCTAssertEqual(event?["device"] as? String, "phone")
    }

    /// alice sends a file to a room whose two other members are offline: it is uploaded once
    /// (the chunks the relay stored and the bytes alice sent are about the file's, not twice
    /// them: before, each member's transfer uploaded its own copy) and granted to the second
    /// member; each member's `simp listen` gets it whole, as a room file, when it connects; the
    /// relay's copy goes once both have it.
    func testARoomFileForTwoMembersOfflineIsUploadedOnce() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob"), carol = TestRelay.uniqueUser("carol")
        let room = "once\(UInt32.random(in: 0...UInt32.max))"
        let bobDownloads = home.appendingPathComponent("downloads-bob"), carolDownloads = home.appendingPathComponent("downloads-carol")
        try await registerThenGoOffline(bob, into: bobDownloads, extra: ["--room", room])
        try await registerThenGoOffline(carol, into: carolDownloads, extra: ["--room", room])
        let contents = try writeFile(megabytes: 2)
        let send = try await sendToRoom(room, from: alice)
        let status = await send.exitStatus(timeout: 300)
        XCTAssertEqual(status, 0, send.standardError)
        XCTAssertTrue(
            send.standardOutput.contains("to 2 of 2 members of #\(room) in ")
                && send.standardOutput.contains("the relay holds it for 2 of them (uploaded once)"),
            send.standardOutput + send.standardError)
        print("room file for two members offline: \(send.standardOutput)")
        let chunks = (contents.count + FileSend.chunkSize - 1) / FileSend.chunkSize
        let stored = uploads.withLockedValue { $0[alice] ?? 0 }
        XCTAssertGreaterThanOrEqual(stored, chunks)
        XCTAssertLessThan(stored, chunks * 3 / 2, "chunks uploaded: once for both members, not once each")
        let sent = send.standardError.components(separatedBy: "sent ").last?.prefix { $0.isNumber }
        XCTAssertLessThan(Int(sent ?? "") ?? .max, contents.count * 3 / 2, "bytes alice sent: " + send.standardError)
        print("room file for two members offline: \(stored) chunks stored for a file of \(chunks), \(sent ?? "?") bytes sent for \(contents.count)")

        for (member, downloads) in [(bob, bobDownloads), (carol, carolDownloads)] {
            let listening = try await listen(member, into: downloads)
            await assertSaves(listening, contents, into: downloads)
            XCTAssertTrue(listening.standardOutput.contains("from \(alice) in #\(room) saved to"), listening.standardOutput)
        }
        await assertHeldFilesGo(of: alice, "still held after bob and carol have it")
    }

    /// A room file for bob and carol, both offline when alice sends it; both connect while it is
    /// uploaded (the store keeps its last chunk only 12 s after it came, so they surely do): one
    /// gets the upload, the other waits for the grant, its device told FILE_NOT_HELD meanwhile.
    /// Both have the file within 3 s of the relay granting it (the relay tells the waiting
    /// device of the grant; before, its next FILE_FETCH came up to 30 s later: here ~8 s).
    func testAWaitingRoomMembersDeviceOnlineGetsTheFilePromptlyOnceGranted() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob"), carol = TestRelay.uniqueUser("carol")
        let room = "prompt\(UInt32.random(in: 0...UInt32.max))"
        let downloads = [bob: home.appendingPathComponent("downloads-bob"), carol: home.appendingPathComponent("downloads-carol")]
        for member in [bob, carol] { try await registerThenGoOffline(member, into: downloads[member]!, extra: ["--room", room]) }
        let contents = try writeFile(megabytes: 1)
        let send = try await sendToRoom(room, from: alice)
        let uploading = await Eventually.holds(within: .seconds(60)) { self.uploads.withLockedValue { ($0[alice] ?? 0) > 0 } }
        XCTAssertTrue(uploading, send.standardError)
        var listens: [String: ChildProcess] = [:]
        for member in [bob, carol] { listens[member] = try await listen(member, into: downloads[member]!) }
        XCTAssertNil(granted.withLockedValue { $0 }, "both members connected before the grant")
        var savedAt: [String: NIODeadline] = [:]
        let bothSaved = await Eventually.holds(within: .seconds(90)) {
            for (member, listening) in listens where savedAt[member] == nil && listening.standardOutput.contains("file: offline.bin (") {
                savedAt[member] = .now()
            }
            return savedAt.count == 2
        }
        XCTAssertTrue(bothSaved, listens.values.map { $0.standardOutput + $0.standardError }.joined(separator: "\n"))
        for member in [bob, carol] { await assertSaves(listens[member]!, contents, into: downloads[member]!) }
        let status = await send.exitStatus(timeout: 60)
        XCTAssertEqual(status, 0, send.standardError)
        let grantedAt = try XCTUnwrap(granted.withLockedValue { $0 }, "the file was granted to the second member")
        let lag = Double((savedAt.values.max()! - grantedAt).nanoseconds) / 1e9
        print("room file: the waiting member's device had it \(lag) s after the grant")
        XCTAssertLessThan(lag, 3, "the waiting member's device fetched the file soon after the grant")
    }

    /// `listen` saves `offline.bin` into `downloads`, with the SHA-256 of `contents`.
    private func assertSaves(_ listen: ChildProcess, _ contents: [UInt8], into downloads: URL, line: UInt = #line) async {
        let saved = await Eventually.holds(within: .seconds(30)) { listen.standardOutput.contains("file: offline.bin (\(contents.count) bytes") }
        XCTAssertTrue(saved, listen.standardOutput + listen.standardError, line: line)
        let bytes = FileManager.default.contents(atPath: downloads.appendingPathComponent("offline.bin").path).map { Array($0) }
        XCTAssertEqual(bytes.map(FileDigest.of), FileDigest.of(contents), line: line)
    }

    /// Redis soon holds no file of `owner`'s.
    private func assertHeldFilesGo(of owner: String, _ why: String, line: UInt = #line) async {
        var left = ["?"]
        let deleted = await Eventually.holds(within: .seconds(10)) {
            left = (try? await self.heldFileKeys(of: owner)) ?? ["?"]
            return left.isEmpty
        }
        XCTAssertTrue(deleted, "\(why): \(left)", line: line)
    }

    /// bob's device once (so a sender can encrypt to it), then bob goes offline.
    private func registerThenGoOffline(_ user: String, into downloads: URL, extra: [String] = []) async throws {
        let first = try await listen(user, into: downloads, extra: extra)
        first.signal(SIGTERM)
        _ = await first.exitStatus(timeout: 10)
    }

    /// `simp send --file` of `megabytes` MB of seeded random bytes (`offline.bin`) from `sender` to `receiver`.
    private func sendFile(
        megabytes: Int, from sender: String, to receiver: String, extra: [String] = []
    ) async throws -> (contents: [UInt8], send: ChildProcess) {
        let contents = try writeFile(megabytes: megabytes)
        let path = home.appendingPathComponent("offline.bin")
        let send = try ChildProcess(
            "simp", ["send", "--server", "127.0.0.1:\(relay.port)", "--user", sender, "--to", receiver, "--file", path.path] + extra,
            environment: try await environment(sender))
        children.append(send)
        return (contents, send)
    }

    /// `simp send --room ROOM --join --file offline.bin` of `sender`.
    private func sendToRoom(_ room: String, from sender: String) async throws -> ChildProcess {
        let send = try ChildProcess(
            "simp",
            [
                "send", "--server", "127.0.0.1:\(relay.port)", "--user", sender, "--room", room, "--join", "--file",
                home.appendingPathComponent("offline.bin").path,
            ],
            environment: try await environment(sender))
        children.append(send)
        return send
    }

    /// `megabytes` MB of seeded random bytes written to `offline.bin` under the test's home.
    private func writeFile(megabytes: Int) throws -> [UInt8] {
        var random = SplitMix64(seed: 54)
        let contents = (0..<megabytes * 1_000_000 / 8).flatMap { _ in withUnsafeBytes(of: random.next()) { Array($0) } }
        XCTAssertTrue(FileManager.default.createFile(atPath: home.appendingPathComponent("offline.bin").path, contents: Data(contents)))
        return contents
    }

    /// `simp listen` of `user`'s `device` saving files into `downloads`, once it listens.
    private func listen(_ user: String, device: String = "phone", into downloads: URL, extra: [String] = []) async throws -> ChildProcess {
        let listen = try ChildProcess(
            "simp",
            ["listen", "--server", "127.0.0.1:\(relay.port)", "--user", user, "--device", device, "--downloads", downloads.path] + extra,
            environment: try await environment(user))
        children.append(listen)
        let listening = await Eventually.holds(within: .seconds(15)) { listen.standardError.contains("listening as") }
        XCTAssertTrue(listening, listen.standardError)
        return listen
    }

    /// The Redis keys of the files `owner` has held for offline receivers.
    private func heldFileKeys(of owner: String) async throws -> [String] {
        try await relay.inspector.scanKeys(matching: "simp:file:\(KeyTag.user(owner)):*").sorted()
    }
}

/// Redis's store, counting the FILE_FETCH requests for chunks it is asked and the uploaded
/// chunks it is asked to keep (by the file's sender).
private final class FetchCountingStore: WrappingRelayStore, @unchecked Sendable {
    let inner: RedisRelayStore
    private let fetches: NIOLockedValueBox<[String: Int]>
    private let uploads: NIOLockedValueBox<[String: Int]>
    private let granted: NIOLockedValueBox<NIODeadline?>
    /// How long a file's last chunk waits before it is stored (nil: not at all).
    private let lastChunkDelay: TimeAmount?

    init(
        wrapping inner: RedisRelayStore, fetches: NIOLockedValueBox<[String: Int]>, uploads: NIOLockedValueBox<[String: Int]>,
        granted: NIOLockedValueBox<NIODeadline?>, lastChunkDelay: TimeAmount?
    ) {
        self.inner = inner
        self.fetches = fetches
        self.uploads = uploads
        self.granted = granted
        self.lastChunkDelay = lastChunkDelay
    }

    func perform(_ request: StoreRequest, on eventLoop: EventLoop) -> EventLoopFuture<StoreAnswer> {
        switch request {
        case .fetchHeldChunks(let fetch): fetches.withLockedValue { $0[fetch.owner, default: 0] += 1 }
        case .holdFileChunk(let chunk):
            uploads.withLockedValue { $0[chunk.owner, default: 0] += 1 }
            if let delay = lastChunkDelay, chunk.index == chunk.chunkCount - 1 {
                return eventLoop.flatScheduleTask(in: delay) { self.inner.perform(request, on: eventLoop) }.futureResult
            }
        case .grantHeldFile:
            return inner.perform(request, on: eventLoop).map { [granted] answer in
                if case .grantHeldFile(_, .granted) = answer { granted.withLockedValue { $0 = $0 ?? .now() } }
                return answer
            }
        default: break
        }
        return inner.perform(request, on: eventLoop)
    }

}
