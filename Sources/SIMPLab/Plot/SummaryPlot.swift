extension LabPlot {
    /// The SVG comparing several runs: one row per run with its p50, p99 and maximum latency
    /// on a shared axis, its datagrams per message and its result.
    public static func summary(_ reports: [ScenarioReport]) -> String {
        let rowHeight = 28.0
        let frame = ChartFrame(left: 170, top: 96, width: 560, height: rowHeight * Double(max(1, reports.count)))
        var canvas = SVGCanvas(width: 960, height: frame.bottom + 70)
        let passed = reports.filter(\.passed).count
        let modes = Set(reports.map(\.mode.rawValue)).sorted().joined(separator: ", ")
        canvas.text(
            "simp-lab suite — \(reports.count) runs (\(modes) mode), \(passed) passed, \(reports.count - passed) failed",
            x: 20, y: 28, size: 17, weight: "bold", attributes: "class=\"title\"")
        canvas.text(
            "send → receipt latency per scenario: ● p50   ◆ p99   | max  (log scale); red rows failed a bar",
            x: 20, y: 50, fill: "#555")
        let values = reports.compactMap(\.latency).flatMap { [$0.p50, $0.p99, $0.max] }
        let x = ChartScale.fitting(values.isEmpty ? [1, 1000] : values + [values.min()! / 2], pixels: (frame.left, frame.right), logAbove: 1)
        canvas.open("class=\"panel\" id=\"summary\"")
        drawRowAxes(on: &canvas, frame: frame, x: x, count: reports.count, rowHeight: rowHeight)
        canvas.text("datagrams/msg", x: frame.right + 80, y: frame.top - 10, anchor: "end", size: 11, weight: "bold")
        canvas.text("result", x: frame.right + 100, y: frame.top - 10, size: 11, weight: "bold")
        canvas.open("class=\"series\" data-name=\"latency\" data-points=\"\(reports.count)\"")
        for (index, report) in reports.enumerated() {
            let middle = frame.top + rowHeight * (Double(index) + 0.5)
            let colour = report.passed ? latencyColour : failedColour
            canvas.text(
                report.scenario, x: frame.left - 10, y: middle + 4, anchor: "end", fill: report.passed ? "#222" : failedColour,
                attributes: "class=\"row-label\"")
            if let latency = report.latency {
                canvas.line(x1: x(latency.p50), y1: middle, x2: x(latency.max), y2: middle, stroke: colour, width: 2)
                canvas.circle(x: x(latency.p50), y: middle, r: 5, fill: colour)
                let p99 = x(latency.p99)
                canvas.add(
                    "<polygon points=\"\(canvas.n(p99)),\(canvas.n(middle - 6)) \(canvas.n(p99 + 6)),\(canvas.n(middle)) "
                        + "\(canvas.n(p99)),\(canvas.n(middle + 6)) \(canvas.n(p99 - 6)),\(canvas.n(middle))\" fill=\"white\" "
                        + "stroke=\"\(colour)\" stroke-width=\"2\"/>")
                canvas.line(x1: x(latency.max), y1: middle - 8, x2: x(latency.max), y2: middle + 8, stroke: colour, width: 2.5)
                canvas.text(SVGCanvas.number(latency.max), x: x(latency.max) + 5, y: middle - 5, size: 9, fill: "#666")
            } else {
                canvas.text("nothing receipted", x: frame.left + 8, y: middle + 4, fill: failedColour)
            }
            canvas.text(ReportTable.fixed(report.datagramsPerMessage, 2), x: frame.right + 80, y: middle + 4, anchor: "end")
            let result = report.passed ? "PASS" : "FAIL: " + report.failedBars.map(\.name).joined(separator: ", ")
            canvas.text(result, x: frame.right + 100, y: middle + 4, weight: "bold", fill: report.passed ? "#2a7d2a" : failedColour)
        }
        canvas.close()
        canvas.close()
        return canvas.document
    }

    private static func drawRowAxes(on canvas: inout SVGCanvas, frame: ChartFrame, x: ChartScale, count: Int, rowHeight: Double) {
        canvas.rect(x: frame.left, y: frame.top, width: frame.width, height: frame.height, fill: "#fafafa")
        for row in stride(from: 1, to: count, by: 2) {
            canvas.rect(x: frame.left, y: frame.top + rowHeight * Double(row), width: frame.width, height: rowHeight, fill: "#f0f0f0")
        }
        canvas.open("class=\"axis x\"")
        for tick in x.ticks {
            canvas.line(x1: x(tick), y1: frame.top, x2: x(tick), y2: frame.bottom, stroke: "#dcdcdc")
            canvas.text(ChartFrame.label(tick), x: x(tick), y: frame.bottom + 16, anchor: "middle", size: 11, attributes: "class=\"tick\"")
        }
        canvas.line(x1: frame.left, y1: frame.bottom, x2: frame.right, y2: frame.bottom, stroke: "#444")
        canvas.text(
            "send → receipt latency (ms, log scale)", x: frame.left + frame.width / 2, y: frame.bottom + 34,
            anchor: "middle", attributes: "class=\"axis-label\"")
        canvas.close()
        canvas.open("class=\"axis y\"")
        canvas.line(x1: frame.left, y1: frame.top, x2: frame.left, y2: frame.bottom, stroke: "#444")
        canvas.close()
    }
}
