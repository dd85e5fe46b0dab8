import Foundation
import SIMPLab
import XCTest

#if canImport(FoundationXML)
import FoundationXML
#endif

/// The time panels mark what the scenario did and what the clients did about it, and the
/// legend names only those marks.
final class ImpairmentPlotTests: XCTestCase {
    func testUDPBlockedMidwayShadesTheBlockAndMarksTheMoveToTheControlConnection() throws {
        var scenario = try Suite.scenario("udp-blocked-midway")
        scenario.workload.messages = 350 // 7 s: the block comes at 5 s
        let run = Simulation.execute(scenario, seed: 1)
        XCTAssertGreaterThan(run.report.pathSwitches, 0)
        XCTAssertEqual(run.pathChanges.count, run.report.pathSwitches, "every move is on the timeline")
        let blockedAt = try XCTUnwrap(scenario.link.up.udp?.blockedAtMs)
        XCTAssertTrue(run.pathChanges.allSatisfy { $0.toControl && $0.atMs >= blockedAt }, "\(run.pathChanges)")

        let svg = try SVGTree(LabPlot.run(run))
        for id in ["latency-over-time", "retransmissions"] {
            let panel = try XCTUnwrap(svg.root.first { $0.attributes["id"] == id }, id)
            let blocked = panel.all { $0.attributes["class"] == "impairment" && $0.attributes["data-kind"] == "udp-blocked" }
            XCTAssertEqual(blocked.count, 1, "\(id): the blocked period is shaded")
            XCTAssertTrue(blocked.first?.all { $0.name == "text" }.map(\.text).contains("UDP blocked: all links") == true, id)
            let moves = panel.all { $0.attributes["class"] == "path-switch" }
            XCTAssertEqual(moves.count, run.pathChanges.count, "\(id): each move is marked")
            XCTAssertEqual(Set(moves.compactMap { $0.attributes["data-to"] }), ["control"], id)
            XCTAssertTrue(moves.contains { $0.all { $0.name == "text" }.contains { $0.text.hasPrefix("datagrams to the control connection") } }, id)
            XCTAssertTrue(panel.all { $0.attributes["class"] == "impairment" && $0.attributes["data-kind"] == "blackout" }.isEmpty)
            XCTAssertTrue(panel.all { $0.attributes["class"] == "fault" }.isEmpty)
        }
        let legend = try XCTUnwrap(svg.root.first { $0.attributes["class"] == "legend" })
        let labels = legend.all { $0.name == "text" }.map(\.text)
        XCTAssertEqual(
            labels,
            [
                "receipted message", "failed / no outcome (× in the top strip)", "UDP blocked",
                "a client's datagrams move (UDP ⇄ control connection)",
            ])
    }

    func testABlackoutAndAFaultAreInTheLegendOnlyWhenTheRunHasThem() throws {
        var scenario = try Suite.scenario("blackout")
        scenario.workload.messages = 100
        scenario.link.up.blackouts = [.init(atMs: 500, forMs: 500)]
        scenario.link.down.blackouts = scenario.link.up.blackouts
        scenario.faults = [Fault(atMs: 1200, kind: .closeControl, target: .all)]
        let svg = try SVGTree(LabPlot.run(Simulation.execute(scenario, seed: 1)))
        let labels = try XCTUnwrap(svg.root.first { $0.attributes["class"] == "legend" }).all { $0.name == "text" }.map(\.text)
        XCTAssertTrue(labels.contains("blackout") && labels.contains("fault"), "\(labels)")
        XCTAssertFalse(labels.contains("UDP blocked"), "\(labels)")
    }
}
