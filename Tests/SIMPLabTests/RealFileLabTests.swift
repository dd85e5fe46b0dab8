import Foundation
import NIOCore
import SIMPLab
import SIMPTestSupport
import XCTest

/// The file lab in real mode (`simp-lab files --mode real`): a real relay and Redis, two real
/// clients sending a file (1 MB, short for CI) through the impairment proxies, and the kernel's
/// TCP through the same bottleneck and links between two network namespaces (root and
/// /dev/net/tun; skipped with the reason elsewhere).
final class RealFileLabTests: XCTestCase {
    private let setup: FileLab.Setup = {
        var setup = FileLab.Setup(fileBytes: 1_000_000, chatBaselineMessages: 50)
        setup.limit = .seconds(90)
        return setup
    }()

    private func assertSIMPRow(_ report: FileLabReport, file: StaticString = #filePath, line: UInt = #line) {
        let table = FileLabReport.table([report])
        XCTAssertEqual(report.mode, .real, file: file, line: line)
        XCTAssertNotNil(report.simp.completedAfter, "SIMP's file arrived: \(table)", file: file, line: line)
        XCTAssertNil(report.simpFailure, file: file, line: line)
        XCTAssertEqual(report.fileIntact, true, "the saved file has the sent bytes", file: file, line: line)
        XCTAssertGreaterThanOrEqual(report.simp.payloadBytesSent, 1_000_000, "every byte was sent at least once", file: file, line: line)
        XCTAssertEqual(report.simp.progress.last?.bytes, 1_000_000, file: file, line: line)
        XCTAssertFalse(report.simp.chatLatencies.isEmpty, "chat messages arrived during the transfer", file: file, line: line)
        XCTAssertFalse(report.chatAloneMs.isEmpty, "chat messages arrived without a file", file: file, line: line)
        XCTAssertTrue(table.contains("(real)"), table, file: file, line: line)
    }

    /// Both rows: SIMP's, and TCP's unless this machine cannot run it (then the report says why).
    private func assertTCPRow(_ report: FileLabReport, file: StaticString = #filePath, line: UInt = #line) {
        if let skipped = report.tcpSkipped {
            XCTAssertTrue(skipped.contains("skipped: "), skipped, file: file, line: line)
            XCTAssertTrue(FileLabReport.table([report]).contains("skipped"), file: file, line: line)
            return
        }
        XCTAssertNotNil(report.tcp.completedAfter, "TCP finished: \(FileLabReport.table([report]))", file: file, line: line)
        XCTAssertGreaterThanOrEqual(report.tcp.payloadBytesSent, 1_000_000, file: file, line: line)
        XCTAssertEqual(report.tcp.progress.last?.bytes, 1_000_000, file: file, line: line)
        XCTAssertTrue(LabPlot.transfer(report).contains("data-name=\"TCP (kernel)\""), file: file, line: line)
    }

    func testOnACleanLinkTheFileArrivesWholeAndTheReportHasBothRows() async throws {
        let report = try await FileLab.runReal(try Suite.scenario("clean"), seed: 1, setup: setup)
        assertSIMPRow(report)
        assertTCPRow(report)
        XCTAssertFalse(report.lossy)
    }

    /// `--relay-process`: the relay is the `simp-server` executable, a process of its own; the
    /// file arrives whole through it. A program that is no relay stops the run with an error, so
    /// the executable is what the run used.
    func testWithTheRelayInAProcessOfItsOwnTheFileArrivesWhole() async throws {
        var separate = setup
        separate.relayBinary = try ChildProcess.locate("simp-server")
        assertSIMPRow(try await FileLab.runReal(try Suite.scenario("clean"), seed: 2, setup: separate))
        separate.relayBinary = URL(fileURLWithPath: "/bin/false")
        do {
            _ = try await FileLab.runReal(try Suite.scenario("clean"), seed: 2, setup: separate)
            XCTFail("a relay that exits at once must stop the run")
        } catch {
            XCTAssertTrue("\(error)".contains("exited at start"), "\(error)")
        }
    }

    func testOnKCPsLossyLinkTheFileArrivesWholeAndLossesWereResent() async throws {
        let report = try await FileLab.runReal(try Suite.scenario("kcp-link"), seed: 1, setup: setup)
        assertSIMPRow(report)
        assertTCPRow(report)
        XCTAssertTrue(report.lossy)
        XCTAssertGreaterThan(report.simp.retransmissions, 0, "the sender's proxy lost chunks: \(FileLabReport.table([report]))")
    }

    /// The kernel's TCP crosses the lab's impairment: 5 % of the sender's packets lost, so some
    /// segments are sent again, and every byte still arrives; the TUN devices are closed after.
    func testRealTCPCrossesTheImpairmentAndLeavesNoDeviceBehind() async throws {
        let result: TransferResult
        do { result = try await FileLab.runRealTCP(try Suite.scenario("kcp-link"), seed: 1, setup: setup) } catch let unavailable
            as RealTCPUnavailable
        {
            throw XCTSkip(unavailable.description)
        }
        XCTAssertNotNil(result.completedAfter)
        XCTAssertEqual(result.progress.last?.bytes, 1_000_000)
        XCTAssertGreaterThan(result.retransmissions, 0, "the link lost segments and TCP sent them again")
        XCTAssertGreaterThan(result.payloadBytesSent, 1_000_000)
        let descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")
        let tunnels = descriptors.filter { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) == "/dev/net/tun" }
        XCTAssertEqual(tunnels, [], "no TUN device left open (its network namespace would stay)")
    }
}
