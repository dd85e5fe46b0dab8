import Foundation
import Logging
import NIOCore
import NIOPosix
import SIMPCore
import SIMPRedis
import SIMPRelay
import SIMPTestSupport
import XCTest

/// Files held for offline receivers (docs/PROTOCOL.md §5.7, §7.12) on real Redis, and on the
/// in-memory store where the answers must be the same: chunks come back byte for byte, a
/// sender's quota refuses a file with the reason, a file expires after the retention, and it is
/// deleted once every device of its receiver has it.
final class HeldFileStoreTests: StoreTestCase {
    /// Names of this test's own (the tests may share one Redis).
    private let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")

    /// Chunk `index` of file `fileId` (`size` bytes in 1,000-byte chunks) from alice to bob:
    /// bytes that are not UTF-8, as sealed chunks are.
    private func chunk(_ index: UInt64, fileId: UInt64 = 5, size: UInt64 = 2500) -> HeldChunk {
        let count = Int(min(1000, size - index * 1000)) + FileChunkCipher.overhead
        let sealed = (0..<count).map { UInt8(truncatingIfNeeded: $0 * 7 + Int(index) + 0x80) }
        return HeldChunk(
            owner: alice, recipient: bob, fileId: fileId, index: index, number: index + 1, fileSize: size, chunkSize: 1000, sealed: sealed)
    }

    private func hold(_ chunk: HeldChunk, in store: any RelayStore) async throws -> HeldChunkResult {
        guard case .holdFileChunk(_, let result) = try await store.perform(.holdFileChunk(chunk), on: loop).get() else {
            throw StoreFailure("not a holdFileChunk answer")
        }
        return result
    }

    private func fetch(_ indices: [UInt64], fileId: UInt64 = 5, by user: String? = nil, in store: any RelayStore) async throws -> [UInt64: [UInt8]]? {
        let request = HeldFileFetch(owner: alice, recipient: user ?? bob, fileId: fileId, session: 1, indices: indices)
        guard case .fetchHeldChunks(_, let chunks) = try await store.perform(.fetchHeldChunks(request), on: loop).get() else {
            throw StoreFailure("not a fetchHeldChunks answer")
        }
        return chunks
    }

    func testChunksComeBackByteForByteOnlyToTheReceiverAndTheLastCompletesTheFile() async throws {
        for store in try await bothStores() {
            let results = [try await hold(chunk(0), in: store), try await hold(chunk(2), in: store), try await hold(chunk(1), in: store)]
            XCTAssertEqual(results, [.held(complete: false), .held(complete: false), .held(complete: true)], "\(store)")
            let again = try await hold(chunk(1), in: store)
            XCTAssertEqual(again, .held(complete: true), "a chunk sent again changes nothing")
            let chunks = try await fetch([0, 1, 2, 3], in: store)
            XCTAssertEqual(chunks, [0: chunk(0).sealed, 1: chunk(1).sealed, 2: chunk(2).sealed], "\(store)")
            let carol = try await fetch([0], by: "carol", in: store)
            XCTAssertNil(carol, "only the receiver gets the chunks")
            let other = try await fetch([0], fileId: 6, in: store)
            XCTAssertNil(other, "no such file")
        }
    }

    func testAFileOverTheSendersQuotaIsRefusedWithTheReason() async throws {
        for store in try await bothStores({ $0.heldFilesMaxBytesPerUser = 5000 }) {
            let first = try await hold(chunk(0, fileId: 1, size: 2500), in: store)
            XCTAssertEqual(first, .held(complete: false))
            let refused = try await hold(chunk(0, fileId: 2, size: 3000), in: store)
            XCTAssertEqual(refused, .refused(HeldFileStore.quotaText(used: 2500, size: 3000, limit: 5000)), "\(store)")
            let third = try await hold(chunk(0, fileId: 3, size: 2500), in: store)
            XCTAssertEqual(third, .held(complete: false), "up to the quota is fine")
            let nothing = try await fetch([0], fileId: 2, in: store)
            XCTAssertNil(nothing, "nothing of the refused file was kept")
        }
    }

    func testAHeldFileExpiresAfterTheRetentionAndNoLongerCountsAgainstTheQuota() async throws {
        let store = try await redisStore {
            $0.heldFileRetentionSeconds = 1
            $0.heldFilesMaxBytesPerUser = 3000
        }
        let first = try await hold(chunk(0), in: store)
        XCTAssertEqual(first, .held(complete: false))
        try await Task.sleep(nanoseconds: 1_300_000_000)
        let expired = try await fetch([0], in: store)
        XCTAssertNil(expired)
        let keys = try await store.redis.command([
            "EXISTS", HeldFileStore.fileKey(owner: alice, fileId: 5), HeldFileStore.chunksKey(owner: alice, fileId: 5),
        ])
        XCTAssertEqual(keys, .integer(0))
        let later = try await hold(chunk(0, fileId: 9), in: store)
        XCTAssertEqual(later, .held(complete: false), "the expired file's bytes are free again")
    }

    func testAFileIsDeletedOnceEveryDeviceOfTheReceiverHasIt() async throws {
        let store = try await redisStore()
        _ = try await store.redis.command(["HSET", Registry.devicesKey(bob), "phone", "1", "laptop", "1"])
        for index: UInt64 in 0..<3 { _ = try await hold(chunk(index), in: store) }
        // Each answer says whether the device said so for the first time (its uploader hears it).
        func release(_ recipient: String, _ device: String) async throws -> StoreAnswer {
            try await store.perform(.releaseHeldFile(owner: alice, fileId: 5, recipient: recipient, device: device), on: loop).get()
        }
        let phone = try await release(bob, "phone")
        XCTAssertEqual(phone, .releaseHeldFile(owner: alice, fileId: 5, recipient: bob, device: "phone", firstTime: true))
        let phoneAgain = try await release(bob, "phone")
        XCTAssertEqual(phoneAgain, .releaseHeldFile(owner: alice, fileId: 5, recipient: bob, device: "phone", firstTime: false))
        let kept = try await fetch([0], in: store)
        XCTAssertEqual(kept?.count, 1, "the laptop has not got it yet")
        let carol = try await release("carol", "x")
        XCTAssertEqual(carol, .releaseHeldFile(owner: alice, fileId: 5, recipient: "carol", device: "x", firstTime: false), "not hers")
        let laptop = try await release(bob, "laptop")
        XCTAssertEqual(laptop, .releaseHeldFile(owner: alice, fileId: 5, recipient: bob, device: "laptop", firstTime: true))
        let gone = try await fetch([0], in: store)
        XCTAssertNil(gone)
        let keys = try await store.redis.pipeline([
            ["EXISTS", HeldFileStore.fileKey(owner: alice, fileId: 5), HeldFileStore.chunksKey(owner: alice, fileId: 5)],
            ["HEXISTS", HeldFileStore.filesKey(alice), "5"],
        ])
        XCTAssertEqual(keys, [.integer(0), .integer(0)])
    }

    private func grant(_ fileId: UInt64 = 5, to user: String, in store: any RelayStore) async throws -> HeldFileGrantResult {
        let request = HeldFileGrant(owner: alice, recipient: user, fileId: fileId, session: 1)
        guard case .grantHeldFile(_, let result) = try await store.perform(.grantHeldFile(request), on: loop).get() else {
            throw StoreFailure("not a grantHeldFile answer")
        }
        return result
    }

    /// A file forwarded from the relay's copy: granted only once held whole, counted against
    /// the sender's quota once more per receiver, fetched by the new receiver.
    func testAGrantLetsASecondReceiverFetchTheWholeFileWithinTheQuota() async throws {
        for store in try await bothStores({ $0.heldFilesMaxBytesPerUser = 6000 }) {
            let carol = TestRelay.uniqueUser("carol"), dave = TestRelay.uniqueUser("dave")
            _ = try await hold(chunk(0), in: store)
            let early = try await grant(to: carol, in: store)
            XCTAssertEqual(early, .notHeld, "still uploading: \(store)")
            for index: UInt64 in 1..<3 { _ = try await hold(chunk(index), in: store) }
            let granted = [try await grant(to: carol, in: store), try await grant(to: carol, in: store), try await grant(to: bob, in: store)]
            XCTAssertEqual(granted, Array(repeating: .granted(chunks: 3), count: 3), "\(store)")
            let fetched = try await fetch([0, 1, 2], by: carol, in: store)
            XCTAssertEqual(fetched?.count, 3, "\(store)")
            let over = try await grant(to: dave, in: store)
            XCTAssertEqual(over, .refused(HeldFileStore.quotaText(used: 5000, size: 2500, limit: 6000)), "counted once per receiver: \(store)")
            let other = try await grant(6, to: dave, in: store)
            XCTAssertEqual(other, .notHeld, "no such file of alice's: \(store)")
        }
    }

    func testAHeldFileIsGrantedToAtMost64FurtherReceivers() async throws {
        for store in try await bothStores() {
            for index: UInt64 in 0..<3 { _ = try await hold(chunk(index), in: store) }
            var results: [HeldFileGrantResult] = []
            for receiver in 0...HeldFileGrant.maxPerFile { results.append(try await grant(to: "r\(receiver)", in: store)) }
            XCTAssertEqual(results.prefix(HeldFileGrant.maxPerFile), ArraySlice(repeating: .granted(chunks: 3), count: HeldFileGrant.maxPerFile))
            XCTAssertEqual(results.last, .refused(HeldFileGrant.tooManyText), "\(store)")
        }
    }

    func testAGrantedFileIsDeletedOnceEveryDeviceOfEachReceiverHasIt() async throws {
        let store = try await redisStore()
        let carol = TestRelay.uniqueUser("carol")
        _ = try await store.redis.command(["HSET", Registry.devicesKey(bob), "phone", "1"])
        _ = try await store.redis.command(["HSET", Registry.devicesKey(carol), "phone", "1"])
        for index: UInt64 in 0..<3 { _ = try await hold(chunk(index), in: store) }
        _ = try await grant(to: carol, in: store)
        _ = try await store.perform(.releaseHeldFile(owner: alice, fileId: 5, recipient: bob, device: "phone"), on: loop).get()
        let kept = try await fetch([0], by: carol, in: store)
        XCTAssertEqual(kept?.count, 1, "carol's phone has not got it yet (bob's phone of the same name has)")
        _ = try await store.perform(.releaseHeldFile(owner: alice, fileId: 5, recipient: carol, device: "phone"), on: loop).get()
        let keys = try await store.redis.pipeline([
            ["EXISTS", HeldFileStore.fileKey(owner: alice, fileId: 5), HeldFileStore.chunksKey(owner: alice, fileId: 5)],
            ["HLEN", HeldFileStore.filesKey(alice)],
        ])
        XCTAssertEqual(keys, [.integer(0), .integer(0)], "the file, its chunks and both quota entries are gone")
    }

    /// Redis's memory per MB of sealed chunks held (printed; docs/PERFORMANCE.md).
    func testRedisMemoryPerMegabyteHeld() async throws {
        let store = try await redisStore()
        func used() async throws -> Int {
            let info = try await store.redis.command(["MEMORY", "STATS"])
            let items = info.array ?? []
            let index = items.firstIndex { $0.string == "total.allocated" }
            return index.flatMap { items[$0 + 1].integer }.map(Int.init) ?? 0
        }
        let before = try await used()
        let size: UInt64 = 4_000_000, chunkSize: UInt64 = 1100
        let count = (size + chunkSize - 1) / chunkSize
        for index in 0..<count {
            let sealed = (0..<Int(min(chunkSize, size - index * chunkSize)) + 16).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(index)) }
            let chunk = HeldChunk(
                owner: alice, recipient: bob, fileId: 77, index: index, number: index + 1, fileSize: size, chunkSize: UInt32(chunkSize),
                sealed: sealed)
            _ = try await hold(chunk, in: store)
        }
        let after = try await used()
        let perMB = Double(after - before) / (Double(size) / 1e6) / 1e6
        print("redis memory for a held file: \(after - before) bytes for \(size) bytes of file (\(String(format: "%.2f", perMB)) MB per MB)")
        XCTAssertGreaterThan(after - before, Int(size), "the chunks are in Redis")
    }
}
