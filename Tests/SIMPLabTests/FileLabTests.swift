import NIOCore
import SIMPLab
import XCTest

/// The file lab in virtual time: a file over SIMP's datagram path (the real `FileSender`,
/// `CubicWindow` and `FileReceiver`) beside the TCP model on the same path, one seed of each
/// of the suite's file links. Parameters: 1 MB (so a debug run stays short), a 20 Mbit/s
/// bottleneck with 100 ms of drop-tail queue, a chat message every 20 ms during the transfer.
final class FileLabTests: XCTestCase {
    let setup = FileLab.Setup(fileBytes: 1_000_000, chatBaselineMessages: 300)

    private func report(_ name: String, seed: UInt64 = 1, setup: FileLab.Setup? = nil) throws -> FileLabReport {
        let scenario = try Suite.scenario(name)
        let report = FileLab.run(scenario, seed: seed, setup: setup ?? self.setup)
        XCTAssertNotNil(report.simp.completedAfter, "SIMP finished")
        XCTAssertNotNil(report.tcp.completedAfter, "TCP finished")
        XCTAssertGreaterThanOrEqual(report.simp.payloadBytesSent, 1_000_000, "every byte was sent at least once")
        return report
    }

    func testOnKCPsLinkSIMPHasTwiceTCPsGoodputAndChatStaysWithinAnRTTOfItsUsualLatency() throws {
        let report = try report("kcp-link")
        XCTAssertTrue(report.lossy)
        XCTAssertGreaterThanOrEqual(report.goodputRatio, 2, FileLabReport.table([report]))
        XCTAssertGreaterThan(report.simp.lossesTolerated, 0, "random loss was resent, not taken for congestion")
        XCTAssertLessThanOrEqual(try XCTUnwrap(report.chatDuringP99), try XCTUnwrap(report.chatLimitMs), FileLabReport.table([report]))
    }

    func testOnBurstLossSIMPHasTwiceTCPsGoodputAndChatStaysWithinAnRTTOfItsUsualLatency() throws {
        let report = try report("burst-loss")
        XCTAssertGreaterThanOrEqual(report.goodputRatio, 2, FileLabReport.table([report]))
        XCTAssertLessThanOrEqual(try XCTUnwrap(report.chatDuringP99), try XCTUnwrap(report.chatLimitMs), FileLabReport.table([report]))
    }

    func testOnACleanLinkSIMPHasAtLeastFourFifthsOfTCPsGoodputAndChatStaysWithinAnRTTOfItsUsualLatency() throws {
        // 10 MB, the bar's size (a few seconds of virtual time): a megabyte is mostly slow start.
        let report = try report("clean", setup: FileLab.Setup(fileBytes: 10_000_000, chatBaselineMessages: 300))
        XCTAssertFalse(report.lossy)
        XCTAssertGreaterThanOrEqual(report.goodputRatio, 0.8, FileLabReport.table([report]))
        XCTAssertLessThan(report.simp.bytesSentPerByte, 1.02, "no loss on the link: next to nothing sent twice")
        XCTAssertEqual(report.simp.queueDrops, 0, "slow start left before the bottleneck's queue overflowed")
        XCTAssertLessThanOrEqual(try XCTUnwrap(report.chatDuringP99), try XCTUnwrap(report.chatLimitMs), FileLabReport.table([report]))
        let table = FileLabReport.table([report])
        for column in ["SIMP MB/s", "TCP MB/s", "ratio", "SIMP sent/B", "chat p99"] { XCTAssertTrue(table.contains(column), column) }
    }

    func testTheProgressPlotDrawsBothTransfersToTheWholeFile() throws {
        let report = try report("clean")
        XCTAssertEqual(report.simp.progress.last?.bytes, 1_000_000)
        XCTAssertEqual(report.tcp.progress.last?.bytes, 1_000_000)
        let svg = LabPlot.transfer(report)
        XCTAssertTrue(svg.contains("data-name=\"SIMP\""))
        XCTAssertTrue(svg.contains("data-name=\"TCP model\""))
    }

    func testASeedGivesTheSameReport() throws {
        let first = try report("kcp-link", seed: 2)
        let second = try report("kcp-link", seed: 2)
        XCTAssertEqual(first.simp, second.simp)
        XCTAssertEqual(first.tcp, second.tcp)
    }
}
