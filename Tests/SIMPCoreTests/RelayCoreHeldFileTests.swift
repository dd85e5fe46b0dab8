import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// The relay holds a file for a receiver who is offline (docs/PROTOCOL.md §5.7): it stores the
/// uploaded chunks, acknowledges them as the receiver would (its own FILE_ACKs, `fileHeld`),
/// refuses a file over its limit with a reason, and serves the chunks to the receiver later.
final class RelayCoreHeldFileTests: XCTestCase {
    private let c1 = ConnectionID(1), c2 = ConnectionID(2)

    /// A 2,500-byte file in 1,000-byte chunks: 3 chunks, the last of 500 bytes.
    private func upload(_ index: UInt64, number: UInt64 = 1, size: UInt64 = 2500) -> SIMPMessage {
        let plaintext = size > index * 1000 ? min(1000, size - index * 1000) : 1000 // beyond the file: a full chunk
        let sealed = [UInt8](repeating: UInt8(index), count: Int(plaintext) + FileChunkCipher.overhead)
        let chunk = SIMPMessage.fileChunk(sealed, index: index, number: number, fileId: 99, from: "alice", to: "bob")
        return .fileUpload(chunk, fileSize: size, chunkSize: 1000)
    }

    private func held(_ index: UInt64, number: UInt64 = 1, size: UInt64 = 2500) -> HeldChunk {
        let message = upload(index, number: number, size: size)
        return HeldChunk(
            owner: "alice", recipient: "bob", fileId: 99, index: index, number: number, fileSize: size, chunkSize: 1000, sealed: message.chunk)
    }

    /// bob has a device online and another offline: the sender uploads, and each chunk the store
    /// kept goes on at once to bob's receiving sessions here, as a FILE_CHUNK from alice with
    /// `fileSeq` 0; the relay still acknowledges for bob. A refused chunk goes nowhere.
    func testAStoredChunkGoesOnAtOnceToTheReceiversDevicesOnline() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: c1, port: 5555)
        try relay.connect("bob", on: c2, port: 6666)
        XCTAssertEqual(relay.send(upload(1, number: 4)), [.store(.holdFileChunk(held(1, number: 4)))])
        let actions = relay.answer(.holdFileChunk(held(1, number: 4), .held(complete: false)))
        let passedOn = try relay.delivered(to: "bob", in: actions)
        XCTAssertEqual(passedOn.map(\.kind), [.fileChunk])
        XCTAssertEqual(passedOn.map(\.fromUser), ["alice"])
        XCTAssertEqual(passedOn.map(\.toUser), ["bob"])
        XCTAssertEqual(passedOn.map(\.fileId), [99])
        XCTAssertEqual(passedOn.map(\.chunkIndex), [1])
        XCTAssertEqual(passedOn.map(\.fileSeq), [0], "a chunk from the relay, as fetched ones")
        XCTAssertEqual(passedOn.map(\.chunk), [held(1).sealed])
        XCTAssertEqual(try relay.delivered(to: "alice", in: actions).map(\.fileHeld), [true])
        XCTAssertEqual(actions.count, 3, "one to bob, the acknowledgement to alice, a lookup of bob's other relays: \(actions)")
        XCTAssertTrue(actions.contains(.store(.lookup(user: "bob"))), "\(actions)")
        let refused = relay.answer(.holdFileChunk(held(2), .refused("over alice's quota")))
        XCTAssertEqual(try relay.delivered(to: "bob", in: refused), [])
    }

    /// bob's laptop is on another relay (the lookup a stored chunk started says so): the next
    /// chunks stored go there too, published to that relay as FILE_CHUNKs from alice, besides
    /// bob's phone here; the lookup is not repeated while its answer is fresh.
    func testAStoredChunkAlsoGoesToTheReceiversDevicesOnOtherRelays() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: c1, port: 5555)
        try relay.connect("bob", on: c2, port: 6666)
        _ = relay.send(upload(0))
        XCTAssertTrue(relay.answer(.holdFileChunk(held(0), .held(complete: false))).contains(.store(.lookup(user: "bob"))))
        let here = Route(address: try SocketAddress(ipAddress: "127.0.0.1", port: 6666), relayId: "r1")
        let there = Route(address: try SocketAddress(ipAddress: "127.0.0.1", port: 7777), relayId: "r2")
        _ = relay.answer(.lookup(user: "bob", UserRoutes(receivers: [here, there], relays: ["r1", "r2"], knownDevices: 2, known: true)))
        _ = relay.send(upload(1))
        let actions = relay.answer(.holdFileChunk(held(1), .held(complete: false)))
        XCTAssertEqual(try relay.delivered(to: "bob", in: actions).map(\.chunkIndex), [1], "bob's phone here")
        let published = actions.compactMap { action -> SIMPMessage? in
            guard case .store(.publish(let relayId, let delivery)) = action, relayId == "r2", delivery.user == "bob",
                case .datagram(let payload) = delivery.payload
            else { return nil }
            return try? MessageCodec.decode(payload)
        }
        XCTAssertEqual(published.map(\.kind), [.fileChunk], "to bob's laptop's relay: \(actions)")
        XCTAssertEqual(published.map(\.chunkIndex), [1])
        XCTAssertEqual(published.map(\.fromUser), ["alice"])
        XCTAssertEqual(published.map(\.chunk), [held(1).sealed])
        XCTAssertFalse(actions.contains(.store(.lookup(user: "bob"))), "the answer is fresh: \(actions)")
        XCTAssertFalse(actions.contains { if case .store(.publish(relay: "r1", _)) = $0 { true } else { false } }, "not to this relay")
    }

    func testTheRelayStoresAnUploadAndAcknowledgesItUntilItHoldsTheWholeFile() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: c1, port: 5555) // bob is offline
        XCTAssertEqual(relay.send(upload(0)), [.store(.holdFileChunk(held(0)))])
        let first = try relay.delivered(to: "alice", in: relay.answer(.holdFileChunk(held(0), .held(complete: false))))
        XCTAssertEqual(first.count, 1)
        XCTAssertEqual(first.map(\.fileHeld), [true])
        XCTAssertEqual(first.map(\.fileDone), [false])
        XCTAssertEqual(first.map(\.device), [RelayCore.heldFileDevice])
        XCTAssertEqual(first.map(\.fromUser), ["bob"], "the acknowledgement stands for bob's")
        XCTAssertEqual(first.first.flatMap { ChunkRanges(wireForm: $0.fileRanges) }, ChunkRanges([0..<1]))
        _ = relay.send(upload(2, number: 2))
        let second = try relay.delivered(to: "alice", in: relay.answer(.holdFileChunk(held(2, number: 2), .held(complete: false))))
        XCTAssertEqual(second.first.flatMap { ChunkRanges(wireForm: $0.fileRanges) }, ChunkRanges([0..<1, 2..<3]))
        XCTAssertEqual(second.map(\.fileSeq), [2])
        // The store says the file is whole: the sender is told it may go.
        let done = try relay.delivered(to: "alice", in: relay.answer(.holdFileChunk(held(1, number: 3), .held(complete: true))))
        XCTAssertEqual(done.map(\.fileDone), [true])
        XCTAssertEqual(done.first.flatMap { ChunkRanges(wireForm: $0.fileRanges) }, ChunkRanges([0..<3]))
        var sender = FileSender(fileId: 99, chunkCount: 3, now: DevRelay.t0)
        for ack in first + second + done { sender.acknowledgement(ack, now: DevRelay.t0) }
        XCTAssertTrue(sender.isDone)
        XCTAssertTrue(sender.heldByRelay, "held by the relay, not received by bob")
    }

    func testAFileOverTheRelaysLimitIsRefusedWithTheReasonAndNothingIsStored() throws {
        var relay = DevRelay { $0.maxHeldFileBytes = 2000 }
        try relay.connect("alice", on: c1, port: 5555)
        let actions = relay.send(upload(0))
        let reason = "this relay holds files of at most 2000 bytes for receivers who are offline; this one has 2500"
        XCTAssertEqual(actions.first, .reject(.limitReached, detail: "FILE_UPLOAD of alice: \(reason)"))
        XCTAssertFalse(actions.contains { if case .store = $0 { true } else { false } }, "\(actions)")
        let refusal = try relay.delivered(to: "alice", in: actions)
        XCTAssertEqual(refusal.map(\.errorCode), [.fileQuotaExceeded])
        var sender = FileSender(fileId: 99, chunkCount: 3, now: DevRelay.t0)
        sender.acknowledgement(refusal[0], now: DevRelay.t0)
        XCTAssertEqual(sender.refusal, "the relay will not hold the file: \(reason)")
        XCTAssertFalse(sender.isDone)
    }

    func testTheStoresQuotaRefusalReachesTheSender() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: c1, port: 5555)
        let actions = relay.answer(.holdFileChunk(held(0), .refused("over alice's quota")))
        XCTAssertEqual(actions.first, .reject(.limitReached, detail: "FILE_UPLOAD of alice: over alice's quota"))
        let refusal = try relay.delivered(to: "alice", in: actions)
        XCTAssertEqual(refusal.map(\.errorCode), [.fileQuotaExceeded])
        XCTAssertEqual(refusal.map(\.errorText), ["over alice's quota"])
    }

    func testABadUploadIsRejectedWithoutAskingTheStore() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: c1, port: 5555)
        var wrongLength = upload(0)
        wrongLength.chunk.removeLast()
        XCTAssertEqual(relay.send(wrongLength), [.reject(.malformed, detail: "FILE_UPLOAD chunk 0 from alice has 1015 bytes")])
        XCTAssertEqual(
            relay.send(upload(3)),
            [.reject(.missingField, detail: "FILE_UPLOAD from alice without a file id, size, chunk size or a chunk in range")])
        var huge = upload(0)
        huge.fileSize = .max // counting its chunks would overflow
        XCTAssertEqual(
            relay.send(huge), [.reject(.missingField, detail: "FILE_UPLOAD from alice without a file id, size, chunk size or a chunk in range")])
    }

    func testTheReceiverGetsTheHeldChunksAndIsToldWhenNoneAreHeld() throws {
        var relay = DevRelay()
        try relay.connect("bob", on: c2, port: 6666)
        let session = relay.clients["bob"]!.keys.sessionId
        var fetch = SIMPMessage.fileFetch(99, ranges: ChunkRanges([0..<3]), from: "alice")
        fetch.fromUser = "bob"
        let request = HeldFileFetch(owner: "alice", recipient: "bob", fileId: 99, session: session, indices: [0, 1, 2])
        XCTAssertEqual(relay.send(fetch), [.store(.fetchHeldChunks(request))])
        // Chunk 1 is not uploaded yet: the others go, as FILE_CHUNKs from alice.
        let chunks = try relay.delivered(to: "bob", in: relay.answer(.fetchHeldChunks(request, [0: held(0).sealed, 2: held(2).sealed])))
        XCTAssertEqual(chunks.map(\.kind), [.fileChunk, .fileChunk])
        XCTAssertEqual(chunks.map(\.chunkIndex), [0, 2])
        XCTAssertEqual(chunks.map(\.fromUser), ["alice", "alice"])
        XCTAssertEqual(chunks.map(\.chunk), [held(0).sealed, held(2).sealed])
        // None held: bob's fetcher waits before asking again.
        let none = try relay.delivered(to: "bob", in: relay.answer(.fetchHeldChunks(request, nil)))
        XCTAssertEqual(none.map(\.errorCode), [.fileNotHeld])
        let offer = FileReceiver.Offer(
            fileId: 99, sender: "alice", name: "f", size: 2500, chunkSize: 1000, key: Array(repeating: 1, count: 32), digest: [])
        var fetcher = HeldFileFetcher(offer: offer)
        XCTAssertNotNil(fetcher.poll(received: ChunkRanges(), now: DevRelay.t0))
        XCTAssertTrue(fetcher.answered(none[0]))
        XCTAssertNil(fetcher.poll(received: ChunkRanges(), now: DevRelay.t0 + .milliseconds(500)))
        XCTAssertFalse(fetcher.servedByRelay)
    }

    func testAReceiverWithTheWholeFileReleasesItForItsDevice() throws {
        var relay = DevRelay()
        try relay.connect("bob", on: c2, port: 6666)
        let offer = FileReceiver.Offer(
            fileId: 99, sender: "alice", name: "f", size: 2500, chunkSize: 1000, key: Array(repeating: 1, count: 32), digest: [])
        var release = HeldFileFetcher(offer: offer).release()
        release.fromUser = "bob"
        let device = relay.registration("bob", on: c2, port: 6666).device
        XCTAssertEqual(relay.send(release), [.store(.releaseHeldFile(owner: "alice", fileId: 99, recipient: "bob", device: device))])
    }

    /// bob's device says it has alice's held file: the store's answer that this is new tells
    /// alice, the uploader, on her control connection (a FILE_ACK with `fileReceived` from bob's
    /// device), and, while she has no receiving device here, keeps it in her log for her next
    /// connect (named by the file, so bob's other devices store it once). A device saying so
    /// again, or a file the store does not hold for bob, tells nobody anything.
    func testTheUploaderHearsThatTheReceiverGotItsHeldFileAndOfflineItIsStored() throws {
        var relay = DevRelay()
        var news = SIMPMessage(kind: .fileAck, fromUser: "bob", toUser: "alice")
        news.fileId = 99
        news.fileDone = true
        news.fileReceived = true
        news.device = "phone"
        let received = StoreAnswer.releaseHeldFile(owner: "alice", fileId: 99, recipient: "bob", device: "phone", firstTime: true)
        XCTAssertEqual(relay.answer(received), [.store(.storeInInbox(user: "alice", message: news))])
        XCTAssertEqual(InboxEntry(message: news, storedAt: 1).dedupeKey, "f/99/bob")
        XCTAssertTrue(InboxEntry(message: news, storedAt: 1).isHandedOver)

        try relay.connect("alice", on: c1, port: 5555)
        XCTAssertEqual(relay.answer(received), [.send(c1, news)])
        XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(news)).fileReceived, true)
        let again = StoreAnswer.releaseHeldFile(owner: "alice", fileId: 99, recipient: "bob", device: "phone", firstTime: false)
        XCTAssertEqual(relay.answer(again), [])
    }

    /// alice forwards a file the relay holds whole from her upload to bob: her FILE_GRANT asks
    /// the store under her own name (nobody can grant another user's file), and the relay's
    /// FILE_ACK for carol says the whole file (her sender is done), or why not, refused and counted.
    func testAGrantIsAskedUnderTheSendersNameAndAnsweredWithTheWholeFileOrWhyNot() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: c1, port: 5555)
        let grant = HeldFileGrant(owner: "alice", recipient: "carol", fileId: 99, session: relay.clients["alice"]!.keys.sessionId)
        XCTAssertEqual(relay.send(.fileGrant(99, to: "carol", from: "alice")), [.store(.grantHeldFile(grant))])
        let granted = try relay.delivered(to: "alice", in: relay.answer(.grantHeldFile(grant, .granted(chunks: 3))))
        XCTAssertEqual(granted.map(\.kind), [.fileAck])
        XCTAssertEqual(granted.map(\.fromUser), ["carol"])
        XCTAssertEqual(granted.map(\.fileHeld), [true])
        XCTAssertEqual(granted.map(\.fileDone), [true])
        XCTAssertEqual(granted.first.flatMap { ChunkRanges(wireForm: $0.fileRanges) }, ChunkRanges([0..<3]))
        var sender = FileSender(fileId: 99, chunkCount: 3, now: DevRelay.t0)
        sender.acknowledgement(granted[0], now: DevRelay.t0)
        XCTAssertTrue(sender.isDone)
        XCTAssertTrue(sender.heldByRelay)

        let notHeld = relay.answer(.grantHeldFile(grant, .notHeld))
        XCTAssertEqual(notHeld.first, .reject(.fileNotHeld, detail: "FILE_GRANT of alice's file 99 to carol"))
        XCTAssertEqual(try relay.delivered(to: "alice", in: notHeld).map(\.errorCode), [.fileNotHeld])
        let refused = relay.answer(.grantHeldFile(grant, .refused("over alice's quota")))
        XCTAssertEqual(refused.first, .reject(.limitReached, detail: "FILE_GRANT of alice: over alice's quota"))
        XCTAssertEqual(try relay.delivered(to: "alice", in: refused).map(\.errorCode), [.fileQuotaExceeded])

        let noFile = SIMPMessage.fileGrant(0, to: "carol", from: "alice")
        XCTAssertEqual(
            relay.send(noFile), [.reject(.malformed, detail: "FILE_GRANT of \(MessageCodec.encode(noFile).readableBytes) bytes from alice")])
        let longName = SIMPMessage.fileGrant(99, to: String(repeating: "c", count: RelayDelivery.maxUserLength + 1), from: "alice")
        XCTAssertEqual(
            relay.send(longName), [.reject(.malformed, detail: "FILE_GRANT of \(MessageCodec.encode(longName).readableBytes) bytes from alice")])
        XCTAssertEqual(
            relay.send(.fileGrant(99, to: "#room", from: "alice")), [.reject(.missingField, detail: "fileGrant from alice without a user to go to")])
    }

    /// A grant made, carol's devices online hear it: a FILE_ACK from alice (`fileHeld`,
    /// `fileDone`, the whole file) to her receiving session here and, published, on the other
    /// relay where she has one, so a device told FILE_NOT_HELD fetches at once. carol
    /// connected nowhere here: the notice waits for a lookup of her relays. Refused: no notice.
    func testAGrantIsToldToTheReceiversDevicesOnline() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: c1, port: 5555)
        try relay.connect("carol", on: c2, port: 6666)
        let grant = HeldFileGrant(owner: "alice", recipient: "carol", fileId: 99, session: relay.clients["alice"]!.keys.sessionId)
        let here = Route(address: try SocketAddress(ipAddress: "127.0.0.1", port: 6666), relayId: "r1")
        let there = Route(address: try SocketAddress(ipAddress: "127.0.0.1", port: 7777), relayId: "r2")
        _ = relay.answer(.lookup(user: "carol", UserRoutes(receivers: [here, there], relays: ["r1", "r2"], knownDevices: 2, known: true)))
        let actions = relay.answer(.grantHeldFile(grant, .granted(chunks: 3)))
        let told = try relay.delivered(to: "carol", in: actions)
        XCTAssertEqual(told.map(\.kind), [.fileAck])
        XCTAssertEqual(told.map(\.fromUser), ["alice"])
        XCTAssertEqual(told.map(\.fileId), [99])
        XCTAssertEqual(told.map(\.fileHeld), [true])
        XCTAssertEqual(told.map(\.fileDone), [true])
        XCTAssertEqual(told.map(\.errorCode), [.none])
        XCTAssertEqual(told.first.flatMap { ChunkRanges(wireForm: $0.fileRanges) }, ChunkRanges([0..<3]))
        var fetcher = HeldFileFetcher(
            offer: FileReceiver.Offer(fileId: 99, sender: "alice", name: "f", size: 2500, chunkSize: 1000, key: [], digest: []))
        var notHeld = told[0]
        notHeld.fileDone = false
        notHeld.errorCode = .fileNotHeld
        fetcher.answered(notHeld)
        XCTAssertTrue(fetcher.answered(told[0]), "carol's device takes it as the end of its wait")
        let published = actions.compactMap { action -> SIMPMessage? in
            guard case .store(.publish("r2", let delivery)) = action, delivery.user == "carol", case .datagram(let payload) = delivery.payload
            else { return nil }
            return try? MessageCodec.decode(payload)
        }
        XCTAssertEqual(published, told, "to carol's laptop's relay: \(actions)")
        XCTAssertEqual(try relay.delivered(to: "alice", in: actions).map(\.fileDone), [true], "and alice's answer as before")

        let away = HeldFileGrant(owner: "alice", recipient: "dave", fileId: 99, session: grant.session)
        XCTAssertTrue(relay.answer(.grantHeldFile(away, .granted(chunks: 3))).contains(.store(.lookup(user: "dave"))))
        XCTAssertEqual(try relay.delivered(to: "carol", in: relay.answer(.grantHeldFile(grant, .notHeld))), [])
    }

    func testARelayHoldingNoFilesRefusesAGrantWithoutAskingTheStore() throws {
        var relay = DevRelay { $0.maxHeldFileBytes = 0 }
        try relay.connect("alice", on: c1, port: 5555)
        let actions = relay.send(.fileGrant(99, to: "carol", from: "alice"))
        XCTAssertFalse(actions.contains { if case .store = $0 { true } else { false } }, "\(actions)")
        XCTAssertEqual(try relay.delivered(to: "alice", in: actions).map(\.errorCode), [.fileQuotaExceeded])
    }
}
