import NIOCore
import SIMPCore
import XCTest

/// A receiver asks the relay for a held file's chunks a window at a time (docs/PROTOCOL.md
/// §5.7), in virtual time: the next window once the last one arrived, again after a timeout.
final class HeldFileFetcherTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    private func fetcher(window: UInt64 = 4) -> HeldFileFetcher {
        let offer = FileReceiver.Offer(
            fileId: 7, sender: "alice", name: "f", size: 10_000, chunkSize: 1000, key: Array(repeating: 1, count: 32), digest: [])
        var configuration = HeldFileFetcher.Configuration()
        configuration.window = window
        return HeldFileFetcher(offer: offer, configuration: configuration)
    }

    private func asked(_ fetch: SIMPMessage?) -> ChunkRanges? { fetch.flatMap { ChunkRanges(wireForm: $0.fileRanges) } }

    func testAWindowAtATimeTheNextOnceItArrived() {
        var fetcher = fetcher()
        let first = fetcher.poll(received: ChunkRanges(), now: t0)
        XCTAssertEqual(first?.kind, .fileFetch)
        XCTAssertEqual(first?.toUser, "alice")
        XCTAssertEqual(asked(first), ChunkRanges([0..<4]))
        XCTAssertNil(fetcher.poll(received: ChunkRanges([0..<3]), now: t0 + .milliseconds(10)), "chunk 3 is still coming")
        XCTAssertEqual(asked(fetcher.poll(received: ChunkRanges([0..<4]), now: t0 + .milliseconds(20))), ChunkRanges([4..<8]))
        XCTAssertEqual(fetcher.nextDeadline, t0 + .milliseconds(320))
    }

    func testWhatDidNotArriveIsAskedForAgainAfterTheTimeout() {
        var fetcher = fetcher()
        _ = fetcher.poll(received: ChunkRanges(), now: t0)
        _ = fetcher.poll(received: ChunkRanges([0..<4]), now: t0)
        let received = ChunkRanges([0..<6, 7..<8])
        XCTAssertNil(fetcher.poll(received: received, now: t0 + .milliseconds(299)))
        XCTAssertEqual(asked(fetcher.poll(received: received, now: t0 + .milliseconds(300))), ChunkRanges([6..<7, 8..<10]))
        XCTAssertEqual(fetcher.requests, 3)
        XCTAssertFalse(fetcher.servedByRelay, "no chunk came from the relay yet")
        fetcher.chunkArrived(SIMPMessage.fileChunk([1], index: 6, number: 0, fileId: 7, from: "alice", to: "bob"), now: t0 + .milliseconds(400))
        XCTAssertTrue(fetcher.servedByRelay)
        XCTAssertNil(fetcher.poll(received: ChunkRanges([0..<10]), now: t0 + .seconds(1)), "the file is whole")
        let release = fetcher.release()
        XCTAssertEqual(release.kind, .fileFetch)
        XCTAssertTrue(release.fileDone)
    }

    /// The relay did not hold the file when asked (its sender had not begun to upload it, or
    /// sends it live): asked again after 600 ms, then 1.2 s, …; a chunk from the relay brings
    /// the usual pace back, and a live chunk (`fileSeq` above 0) does not.
    func testNotHeldWaitsLongerEachTimeUntilAChunkComesFromTheRelay() {
        var fetcher = fetcher()
        let notHeld: SIMPMessage = {
            var ack = SIMPMessage(kind: .fileAck, fromUser: "alice", toUser: "bob")
            ack.fileId = 7
            ack.fileHeld = true
            ack.errorCode = .fileNotHeld
            return ack
        }()
        XCTAssertNotNil(fetcher.poll(received: ChunkRanges(), now: t0))
        XCTAssertTrue(fetcher.answered(notHeld))
        XCTAssertEqual(fetcher.nextDeadline, t0 + .milliseconds(600))
        XCTAssertNil(fetcher.poll(received: ChunkRanges(), now: t0 + .milliseconds(599)))
        XCTAssertEqual(asked(fetcher.poll(received: ChunkRanges(), now: t0 + .milliseconds(600))), ChunkRanges([0..<4]))
        XCTAssertTrue(fetcher.answered(notHeld))
        XCTAssertEqual(fetcher.nextDeadline, t0 + .milliseconds(1800))
        fetcher.chunkArrived(SIMPMessage.fileChunk([1], index: 0, number: 3, fileId: 7, from: "alice", to: "bob"), now: t0 + .milliseconds(900))
        XCTAssertNil(fetcher.poll(received: ChunkRanges([0..<1]), now: t0 + .milliseconds(1000)), "a live chunk: still waiting")
        XCTAssertFalse(fetcher.servedByRelay)
        fetcher.chunkArrived(SIMPMessage.fileChunk([1], index: 1, number: 0, fileId: 7, from: "alice", to: "bob"), now: t0 + .milliseconds(950))
        XCTAssertTrue(fetcher.servedByRelay)
        XCTAssertEqual(fetcher.nextDeadline, t0 + .milliseconds(900), "the usual 300 ms from the last request")
        XCTAssertEqual(asked(fetcher.poll(received: ChunkRanges([0..<2]), now: t0 + .milliseconds(1000))), ChunkRanges([2..<6]))
        for _ in 0..<10 { fetcher.answered(notHeld) }
        XCTAssertEqual(fetcher.nextDeadline, t0 + .milliseconds(1000) + .seconds(30), "at most 30 s")
    }

    /// The relay said it holds no such file (it was still being uploaded for another member of
    /// a room), then that it now holds it whole for this user (its sender granted it): the next
    /// poll asks at once, not after the wait (before, up to 30 s later). The news while no wait
    /// is on, or from someone else, changes nothing.
    func testTheRelaysNewsThatItHoldsTheFileEndsTheWaitAtOnce() {
        var fetcher = fetcher()
        var notHeld = SIMPMessage(kind: .fileAck, fromUser: "alice", toUser: "bob")
        notHeld.fileId = 7
        notHeld.fileHeld = true
        notHeld.errorCode = .fileNotHeld
        var heldWhole = SIMPMessage(kind: .fileAck, fromUser: "alice", toUser: "bob")
        heldWhole.fileId = 7
        heldWhole.fileHeld = true
        heldWhole.fileDone = true
        XCTAssertFalse(fetcher.answered(heldWhole), "no wait is on")
        XCTAssertNotNil(fetcher.poll(received: ChunkRanges(), now: t0))
        for _ in 0..<6 { fetcher.answered(notHeld) }
        XCTAssertEqual(fetcher.nextDeadline, t0 + .milliseconds(19_200))
        XCTAssertNil(fetcher.poll(received: ChunkRanges(), now: t0 + .seconds(5)))
        var fromSomeoneElse = heldWhole
        fromSomeoneElse.fromUser = "mallory"
        XCTAssertFalse(fetcher.answered(fromSomeoneElse))
        XCTAssertNil(fetcher.poll(received: ChunkRanges(), now: t0 + .seconds(5)))
        XCTAssertTrue(fetcher.answered(heldWhole))
        XCTAssertFalse(fetcher.notHeld)
        XCTAssertEqual(asked(fetcher.poll(received: ChunkRanges(), now: t0 + .seconds(5))), ChunkRanges([0..<4]), "asked at once")
        XCTAssertEqual(fetcher.nextDeadline, t0 + .seconds(5) + .milliseconds(300), "then the usual pace")
    }

    /// A live transfer to this device alone: the one request made on the announcement is
    /// answered FILE_NOT_HELD, then chunks come from the sender every 10 ms for a minute and
    /// the relay is asked nothing more (before, it was asked again 0.6 s, 1.8 s, 4.2 s, … after,
    /// up to every 30 s). When the sender's chunks stop, the relay is asked again; an offline
    /// receiver that comes back (chunks from the relay) is served at the usual pace.
    func testALiveTransferDoesNotAskTheRelayWhileTheSendersChunksFlow() {
        let offer = FileReceiver.Offer(
            fileId: 7, sender: "alice", name: "f", size: 7_700_000, chunkSize: 1100, key: Array(repeating: 1, count: 32), digest: [])
        var fetcher = HeldFileFetcher(offer: offer)
        var notHeld = SIMPMessage(kind: .fileAck, fromUser: "alice", toUser: "bob")
        (notHeld.fileId, notHeld.fileHeld, notHeld.errorCode) = (7, true, .fileNotHeld)
        XCTAssertNotNil(fetcher.poll(received: ChunkRanges(), now: t0), "on the announcement: the relay may hold it")
        XCTAssertTrue(fetcher.answered(notHeld))
        var now = t0 + .milliseconds(30)
        var received = ChunkRanges()
        for index: UInt64 in 0..<6000 { // 60 s of chunks, each with a poll as FileDownloads does
            fetcher.chunkArrived(.fileChunk([1], index: index, number: index + 1, fileId: 7, from: "alice", to: "bob"), now: now)
            received.insert(index..<(index + 1))
            XCTAssertNil(fetcher.poll(received: received, now: now))
            XCTAssertGreaterThan(fetcher.nextDeadline!, now, "the timer never fires for nothing")
            now = now + .milliseconds(10)
        }
        XCTAssertEqual(fetcher.requests, 1, "only the request made on the announcement")
        XCTAssertTrue(fetcher.isLive(now: now))

        // The sender's chunks stop: after a second the relay is asked again (it may hold the rest).
        XCTAssertNil(fetcher.poll(received: received, now: now + .milliseconds(900)))
        XCTAssertEqual(fetcher.nextDeadline, now - .milliseconds(10) + .seconds(1))
        XCTAssertNotNil(fetcher.poll(received: received, now: now + .seconds(1)))
        XCTAssertEqual(fetcher.requests, 2)

        // A receiver that was offline: its chunks come from the relay, and it asks at the usual pace.
        var offline = HeldFileFetcher(offer: offer)
        XCTAssertNotNil(offline.poll(received: ChunkRanges(), now: t0))
        offline.chunkArrived(.fileChunk([1], index: 0, number: 0, fileId: 7, from: "alice", to: "bob"), now: t0 + .milliseconds(5))
        offline.chunkArrived(.fileChunk([1], index: 1, number: 4, fileId: 7, from: "alice", to: "bob"), now: t0 + .milliseconds(6))
        XCTAssertFalse(offline.isLive(now: t0 + .milliseconds(6)), "the relay serves it: fetching goes on")
        XCTAssertNotNil(offline.poll(received: ChunkRanges([0..<128]), now: t0 + .milliseconds(10)), "the next window at once")
        XCTAssertEqual(offline.requests, 2)
    }
}
