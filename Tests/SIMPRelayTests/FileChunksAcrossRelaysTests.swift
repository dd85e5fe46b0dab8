import NIOConcurrencyHelpers
import NIOCore
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// Files for a receiver with devices on two relays (docs/PROTOCOL.md §5.7), with two real
/// relays on one real Redis and loopback sockets.
final class FileChunksAcrossRelaysTests: XCTestCase {
    private var cluster: TestRelayCluster?

    override func tearDown() async throws {
        await cluster?.stop()
    }

    /// bob's laptop is on the second relay, his phone on the first, where alice uploads a file
    /// for him (FILE_UPLOAD, as for a receiver with several devices): each chunk the relay
    /// stores reaches both devices at once, neither asking for it (FILE_FETCH). Before, only
    /// the phone got them; the laptop had to fetch every chunk from the store.
    func testChunksTheRelayStoresReachTheReceiversDevicesOnBothRelays() async throws {
        let cluster = try await TestRelayCluster.start(relays: 2)
        self.cluster = cluster
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let laptop = try await cluster.connectClient(user: bob, relay: 1) { $0.device = "laptop" }
        let phone = try await cluster.connectClient(user: bob, relay: 0) { $0.device = "phone" }
        let sender = try await cluster.connectClient(user: alice, relay: 0)
        let fileId = UInt64.random(in: 1...UInt64.max), chunkSize = 1000, count: UInt64 = 300
        let received = [phone, laptop].map { client in
            let indices = NIOLockedValueBox<Set<UInt64>>([])
            Task {
                for await chunk in client.fileDatagrams where chunk.kind == .fileChunk && chunk.fileId == fileId {
                    indices.withLockedValue { _ = $0.insert(chunk.chunkIndex) }
                }
            }
            return indices
        }
        for first in stride(from: UInt64(0), to: count, by: 20) {
            let uploads = (first..<min(first + 20, count)).map { index in
                let sealed = [UInt8](repeating: UInt8(index % 251), count: chunkSize + FileChunkCipher.overhead)
                return SIMPMessage.fileUpload(
                    .fileChunk(sealed, index: index, number: index + 1, fileId: fileId, from: "", to: bob), fileSize: UInt64(chunkSize) * count,
                    chunkSize: chunkSize)
            }
            await sender.sendFileDatagrams(uploads)
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        // The chunks stored before the first lookup of bob answered are fetched, not passed on.
        let most = Int(count) * 9 / 10
        let both = await Eventually.holds(within: .seconds(20)) { received.allSatisfy { $0.withLockedValue { $0.count } >= most } }
        let counts = received.map { $0.withLockedValue { $0.count } }
        print("chunks passed on as stored: phone (same relay) \(counts[0]), laptop (other relay) \(counts[1]) of \(count)")
        XCTAssertTrue(both, "chunks of \(count) that reached the phone and the laptop: \(counts)")
    }

    /// alice uploads a file to the first relay for bob, who is offline, and grants it to carol,
    /// whose device is on the second relay: carol's device hears of the grant (a FILE_ACK from
    /// alice, `fileHeld`, `fileDone`), so a device waiting after FILE_NOT_HELD fetches at once.
    /// Before, it heard nothing and asked again only after its wait (up to 30 s).
    func testAGrantIsToldToTheReceiversDeviceOnAnotherRelay() async throws {
        let cluster = try await TestRelayCluster.start(relays: 2)
        self.cluster = cluster
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob"), carol = TestRelay.uniqueUser("carol")
        let phone = try await cluster.connectClient(user: carol, relay: 1) { $0.device = "phone" }
        let sender = try await cluster.connectClient(user: alice, relay: 0)
        let fileId = UInt64.random(in: 1...UInt64.max), chunkSize = 1000, count: UInt64 = 5
        let told = NIOLockedValueBox<[SIMPMessage]>([])
        Task { for await ack in phone.fileDatagrams where ack.kind == .fileAck { told.withLockedValue { $0.append(ack) } } }
        let held = NIOLockedValueBox<[SIMPMessage]>([])
        Task { for await ack in sender.fileDatagrams where ack.fileDone { held.withLockedValue { $0.append(ack) } } }
        let uploads = (0..<count).map { index in
            SIMPMessage.fileUpload(
                .fileChunk(
                    [UInt8](repeating: 1, count: chunkSize + FileChunkCipher.overhead), index: index, number: index + 1, fileId: fileId, from: "",
                    to: bob), fileSize: UInt64(chunkSize) * count, chunkSize: chunkSize)
        }
        await sender.sendFileDatagrams(uploads)
        let whole = await Eventually.holds(within: .seconds(10)) { held.withLockedValue { $0.contains { $0.fromUser == bob } } }
        XCTAssertTrue(whole, "the relay holds the file for bob")
        await sender.sendFileDatagrams([.fileGrant(fileId, to: carol, from: "")])
        let granted = await Eventually.holds(within: .seconds(10)) { held.withLockedValue { $0.contains { $0.fromUser == carol } } }
        XCTAssertTrue(granted, "alice's grant to carol was answered")
        let heard = await Eventually.holds(within: .seconds(5)) { !told.withLockedValue { $0 }.isEmpty }
        XCTAssertTrue(heard, "carol's phone on the other relay heard of the grant")
        let news = told.withLockedValue { $0 }.first
        XCTAssertEqual(news?.fromUser, alice)
        XCTAssertEqual(news?.fileId, fileId)
        XCTAssertEqual(news?.fileHeld, true)
        XCTAssertEqual(news?.fileDone, true)
        XCTAssertEqual(news?.errorCode, SIMPMessage.ErrorCode.none)
    }
}
