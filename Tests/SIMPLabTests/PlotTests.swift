import Foundation
import SIMPLab
import XCTest

#if canImport(FoundationXML)
import FoundationXML
#endif

/// The SVG pictures, read back as XML: the panels, their axes and series are there and hold
/// the run's data.
final class PlotTests: XCTestCase {
    /// A short lossy run with a blackout and a relay restart, so every mark appears.
    private func eventfulRun() throws -> LabRun {
        var scenario = try Suite.scenario("loss-10")
        scenario.workload.messages = 300
        scenario.senderLink?.up.blackouts = [.init(atMs: 2000, forMs: 1000)]
        scenario.faults = [Fault(atMs: 4000, kind: .restartRelay, forMs: 500)]
        return Simulation.execute(scenario, seed: 3)
    }

    func testRunPictureHasThreePanelsWithAxesAndSeries() throws {
        let run = try eventfulRun()
        let svg = try SVGTree(LabPlot.run(run))
        XCTAssertEqual(svg.root.name, "svg")
        let panels = svg.root.all { $0.attributes["class"] == "panel" }
        XCTAssertEqual(panels.compactMap { $0.attributes["id"] }, ["latency-cdf", "latency-over-time", "retransmissions"])
        for panel in panels {
            for axis in ["axis x", "axis y"] {
                let group = try XCTUnwrap(panel.first { $0.attributes["class"] == axis }, "\(panel.attributes["id"]!) \(axis)")
                XCTAssertGreaterThanOrEqual(group.all { $0.attributes["class"] == "tick" }.count, 3, "\(axis) has tick labels")
                XCTAssertFalse(group.all { $0.attributes["class"] == "axis-label" }.isEmpty)
            }
        }
        func series(_ name: String) throws -> SVGTree.Node {
            try XCTUnwrap(svg.root.first { $0.attributes["class"] == "series" && $0.attributes["data-name"] == name }, name)
        }
        XCTAssertEqual(try series("cdf").all { $0.name == "polyline" }.count, 1)
        XCTAssertEqual(try series("latency").all { $0.name == "circle" }.count, run.report.receipted)
        XCTAssertEqual(try series("failed").attributes["data-points"], "\(run.report.sent - run.report.receipted)")
        XCTAssertGreaterThan(run.report.retransmits, 0)
        XCTAssertEqual(try series("retransmissions").attributes["data-points"], "\(run.report.retransmits)")
        XCTAssertFalse(try series("retransmissions").all { $0.name == "rect" }.isEmpty)
        let blackouts = svg.root.all { $0.attributes["class"] == "impairment" && $0.attributes["data-kind"] == "blackout" }
        XCTAssertEqual(blackouts.count, 2, "marked in the latency and the retransmission panels")
        XCTAssertEqual(svg.root.all { $0.attributes["class"] == "fault" && $0.attributes["data-kind"] == "restartRelay" }.count, 2)
        let header = svg.root.all { $0.attributes["class"] == "impairments" }.map(\.text).joined(separator: "\n")
        XCTAssertTrue(header.contains("senders' links: up 5% loss, 20–30 ms, blackout at 2 s for 1 s; down 5% loss, 20–30 ms"), header)
        XCTAssertTrue(header.contains("receivers' links: 5 ms"), header)
        XCTAssertTrue(header.contains("restartRelay at 4 s for 0.5 s"), header)
    }

    func testDevicesGetAPanelWithASeriesPerDeviceAndTheirOfflineWindows() throws {
        var scenario = try Suite.scenario("device-offline-back")
        scenario.workload.messages = 200
        let run = Simulation.execute(scenario, seed: 2)
        let svg = try SVGTree(LabPlot.run(run))
        let panels = svg.root.all { $0.attributes["class"] == "panel" }.compactMap { $0.attributes["id"] }
        XCTAssertEqual(panels, ["latency-cdf", "latency-over-time", "retransmissions", "device-delivery"])
        for (index, device) in ["phone", "laptop"].enumerated() {
            let series = try XCTUnwrap(svg.root.first { $0.attributes["data-name"] == "device \(device)" }, device)
            XCTAssertEqual(series.all { $0.name == "circle" }.count, try XCTUnwrap(run.report.devices?[index].delivered))
        }
        XCTAssertEqual(svg.root.all { $0.attributes["class"] == "impairment" && $0.attributes["data-kind"] == "offline" }.count, 1)
        let header = svg.root.all { $0.attributes["class"] == "impairments" }.map(\.text).joined(separator: "\n")
        XCTAssertTrue(header.contains("receiver devices: phone; laptop offline at 1 s for 2 s"), header)
        XCTAssertTrue(header.contains("device laptop: "), header)
    }

    func testCDFEndsAtTheShareOfMessagesReceipted() throws {
        let run = try eventfulRun()
        let svg = try SVGTree(LabPlot.run(run))
        let cdf = try XCTUnwrap(svg.root.first { $0.attributes["data-name"] == "cdf" }?.first { $0.name == "polyline" })
        let points = try XCTUnwrap(cdf.attributes["points"]).split(separator: " ").map { $0.split(separator: ",").map { Double($0)! } }
        XCTAssertEqual(points.count, 2 * run.report.receipted + 1)
        let ys = points.map { $0[1] }
        XCTAssertEqual(ys, ys.sorted(by: >), "a CDF only rises (SVG y grows downwards)")
        XCTAssertEqual(points.map { $0[0] }, points.map { $0[0] }.sorted(), "latencies in order")
    }

    func testSummaryHasOneRowPerRun() throws {
        var failing = try Suite.decode(#"{"name": "strict", "workload": {"messages": 20}, "expect": {"maxLatencyMs": 1}}"#)
        failing.link.down.delayMs = 10
        let reports = [try eventfulRun().report, Simulation.run(failing)]
        XCTAssertFalse(reports[1].passed)
        let svg = try SVGTree(LabPlot.summary(reports))
        XCTAssertEqual(svg.root.all { $0.attributes["class"] == "row-label" }.map(\.text), ["loss-10", "strict"])
        XCTAssertNotNil(svg.root.first { $0.attributes["class"] == "axis x" })
        let series = try XCTUnwrap(svg.root.first { $0.attributes["data-name"] == "latency" })
        XCTAssertEqual(series.all { $0.name == "circle" }.count, 2, "a p50 dot per run")
        XCTAssertTrue(series.all { $0.name == "text" }.map(\.text).contains("FAIL: latency_max_ms"))
    }
}

/// An SVG document parsed into a tree of elements.
struct SVGTree {
    final class Node {
        let name: String
        let attributes: [String: String]
        var children: [Node] = []
        var text = ""
        init(name: String, attributes: [String: String]) {
            self.name = name
            self.attributes = attributes
        }

        /// This node and every descendant that matches.
        func all(_ matches: (Node) -> Bool) -> [Node] {
            (matches(self) ? [self] : []) + children.flatMap { $0.all(matches) }
        }

        func first(_ matches: (Node) -> Bool) -> Node? { all(matches).first }
    }

    let root: Node

    init(_ svg: String) throws {
        let parser = XMLParser(data: Data(svg.utf8))
        let builder = Builder()
        parser.delegate = builder
        guard parser.parse(), let root = builder.root else {
            throw LabError("not well-formed XML: \(parser.parserError.map { "\($0)" } ?? "no root")")
        }
        self.root = root
    }

    private final class Builder: NSObject, XMLParserDelegate {
        var root: Node?
        var stack: [Node] = []

        func parser(
            _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            let node = Node(name: name, attributes: attributes)
            if let parent = stack.last { parent.children.append(node) } else { root = node }
            stack.append(node)
        }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            stack.removeLast()
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            stack.last?.text += string
        }
    }
}
