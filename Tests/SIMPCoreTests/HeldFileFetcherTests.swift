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
        XCTAssertTrue(fetcher.servedByRelay)
        XCTAssertNil(fetcher.poll(received: ChunkRanges([0..<10]), now: t0 + .seconds(1)), "the file is whole")
        let release = fetcher.release()
        XCTAssertEqual(release.kind, .fileFetch)
        XCTAssertTrue(release.fileDone)
    }
}
