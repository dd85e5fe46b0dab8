extension LabPlot {
    /// The SVG of a file lab run: the bytes the receiver holds against time, SIMP's transfer
    /// beside the TCP model's on the same path (in real mode: the kernel's TCP, SIMP's progress
    /// being what its receiver acknowledged).
    public static func transfer(_ report: FileLabReport) -> String {
        let frame = ChartFrame(left: 90, top: 70, width: 760, height: 360)
        var canvas = SVGCanvas(width: 900, height: frame.bottom + 70)
        canvas.text(
            "\(report.scenario)\(report.mode == .real ? " (real)" : "") (seed \(report.seed)): \(report.fileBytes / 1_000_000) MB, SIMP \(SVGCanvas.number(report.goodputRatio))× TCP's goodput",
            x: 20, y: 28, size: 17, weight: "bold", attributes: "class=\"title\"")
        canvas.text("bytes held by the receiver (TCP: in order) against time; bottleneck and links as in the report", x: 20, y: 50, fill: "#555")
        let tcp = report.mode == .real ? (report.tcpSkipped == nil ? "TCP (kernel)" : "TCP (skipped)") : "TCP model"
        let series = [("SIMP", report.simp, "#1f6fb4"), (tcp, report.tcp, "#d2691e")]
        let seconds = series.flatMap { $0.1.progress.map(\.seconds) } + [0.001]
        let x = ChartScale.fitting(seconds + [0], pixels: (frame.left, frame.right))
        let y = ChartScale.fitting([0, Double(report.fileBytes) / 1e6], pixels: (frame.bottom, frame.top))
        frame.drawAxes(on: &canvas, x: x, y: y, xLabel: "seconds", yLabel: "MB received")
        for (index, (name, result, colour)) in series.enumerated() {
            canvas.open("class=\"series\" data-name=\"\(name)\" data-points=\"\(result.progress.count)\"")
            canvas.polyline(result.progress.map { (x($0.seconds), y(Double($0.bytes) / 1e6)) }, stroke: colour, width: 2)
            canvas.close()
            let label = name + (result.seconds.map { " — \(SVGCanvas.number($0)) s" } ?? " — unfinished")
            canvas.text(label, x: frame.left + 14, y: frame.top + 20 + 18 * Double(index), weight: "bold", fill: colour)
        }
        return canvas.document
    }
}
