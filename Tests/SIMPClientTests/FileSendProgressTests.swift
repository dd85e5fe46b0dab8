import NIOCore
import XCTest

@testable import SIMPClient

/// `FileSend.Progress.line`, the progress `simp send --file` and `simp chat` show: its rate and
/// ETA are this run's, also when it resumed a transfer whose earlier run left bytes at the receiver.
final class FileSendProgressTests: XCTestCase {
    func testTheRateOfAFreshTransferIsItsBytesOverItsTime() {
        let progress = FileSend.Progress(bytesAcknowledged: 12_000_000, size: 20_000_000, bytesSent: 12_300_000, elapsed: .seconds(4))
        XCTAssertEqual(progress.line, "12.0 MB of 20.0 MB, 3.0 MB/s, ETA 2.7 s (sent 12.3 MB)")
    }

    /// A run that resumed at 8 MB and had 4 MB more acknowledged in 2 s goes at 2 MB/s (not
    /// 12 MB over 2 s), and its ETA for the 8 MB left follows from that.
    func testAResumedTransfersRateCountsOnlyThisRunsBytes() {
        var progress = FileSend.Progress(bytesAcknowledged: 12_000_000, size: 20_000_000, bytesSent: 4_400_000, elapsed: .seconds(2))
        progress.resumed = true
        progress.bytesHeldBefore = 8_000_000
        XCTAssertEqual(progress.line, "12.0 MB of 20.0 MB, 2.0 MB/s, ETA 4.0 s (sent 4.4 MB)")
        progress.bytesAcknowledged = 8_000_000 // nothing new yet
        XCTAssertEqual(progress.line, "8.0 MB of 20.0 MB, 0.0 MB/s, ETA unknown (sent 4.4 MB)")
    }
}
