import Foundation

/// Pictures of runs, as standalone SVG: one run's latency distribution, latency over time and
/// retransmissions over time with the link's blackouts and the faults marked; and a summary
/// chart comparing several runs.
public enum LabPlot {
    static let latencyColour = "#1f77b4"
    static let retransmitColour = "#e6791e"
    static let failedColour = "#d62728"
    static let faultColour = "#8e44ad"
    static let blackoutColour = "#7f7f7f"
    static let udpBlockedColour = "#bcbd22"
    static let pathColour = "#17becf"

    /// The SVG of one run.
    public static func run(_ run: LabRun) -> String {
        // Room for the header's extra lines and the devices panel, when the scenario has devices.
        let lines = Double(deviceLines(run.report).count + (describeDevices(run.scenario) == nil ? 0 : 1))
        let shift = lines * 18
        let devices = run.scenario.receiverDevices == nil ? 0 : devicePanelHeight
        var canvas = SVGCanvas(width: 960, height: 990 + shift + devices)
        header(run, on: &canvas)
        let time = timeScale(run)
        latencyDistribution(run, on: &canvas, frame: ChartFrame(left: 90, top: 150 + shift, width: 830, height: 200))
        latencyOverTime(run, on: &canvas, frame: ChartFrame(left: 90, top: 420 + shift, width: 830, height: 220), time: time)
        retransmissionsOverTime(run, on: &canvas, frame: ChartFrame(left: 90, top: 750 + shift, width: 830, height: 170), time: time)
        deliveryPerDevice(run, on: &canvas, frame: ChartFrame(left: 90, top: 1000 + shift, width: 830, height: 190), time: time)
        return canvas.document
    }

    // MARK: Header

    private static func header(_ run: LabRun, on canvas: inout SVGCanvas) {
        let report = run.report
        let result = report.passed ? "PASS" : "FAIL (" + report.failedBars.map(\.name).joined(separator: ", ") + ")"
        canvas.text(
            "\(report.scenario) — \(report.mode.rawValue) mode, seed \(report.seed) — \(result)", x: 20, y: 28,
            size: 17, weight: "bold", fill: report.passed ? "#222" : failedColour, attributes: "class=\"title\"")
        var figures = "sent \(report.sent) · delivered \(report.delivered) · receipted \(report.receipted) · failed \(report.failed)"
        figures += " · unresolved \(report.unresolved) · \(ReportTable.fixed(report.datagramsPerMessage, 2)) datagrams/message"
        figures += " · \(report.retransmits) retransmissions · ended: \(report.ended.rawValue)"
        canvas.text(figures, x: 20, y: 50)
        let scenario = run.scenario
        var lines: [String] = []
        if scenario.senderAccess == scenario.receiverAccess {
            lines.append("every link: " + describe(scenario.senderAccess))
        } else {
            lines.append("senders' links: " + describe(scenario.senderAccess))
            lines.append("receivers' links: " + describe(scenario.receiverAccess))
        }
        if !scenario.faults.isEmpty {
            lines.append(
                "faults: "
                    + scenario.faults.map { fault in
                        "\(fault.kind.rawValue) at \(seconds(fault.atMs))" + (fault.forMs.map { " for \(seconds($0))" } ?? "")
                            + (fault.target.map { " (\($0.rawValue))" } ?? "")
                    }.joined(separator: "; "))
        }
        let workload = scenario.workload
        lines.append(
            "workload: \(workload.senders) sender(s) × \(workload.messages) messages, one every "
                + "\(SVGCanvas.number(Double(workload.interval.nanoseconds) / 1e6)) ms, to \(workload.receivers) receiver(s)")
        lines += [describeDevices(scenario)].compactMap { $0 } + deviceLines(report)
        for (index, line) in lines.enumerated() {
            canvas.text(line, x: 20, y: 72 + Double(index) * 18, fill: "#555", attributes: "class=\"impairments\"")
        }
    }

    /// "5% loss, 30–61 ms" for a direction; "up …, down …" when the directions differ.
    static func describe(_ access: AccessLink) -> String {
        access.up == access.down ? describe(access.up) : "up " + describe(access.up) + "; down " + describe(access.down)
    }

    static func describe(_ link: LinkConditions) -> String {
        var parts: [String] = []
        if link.lossPercent > 0 { parts.append("\(SVGCanvas.number(link.lossPercent))% loss") }
        if let burst = link.burst {
            parts.append("bursts (enter \(SVGCanvas.number(burst.enterBadPercent))%, leave \(SVGCanvas.number(burst.leaveBadPercent))%)")
        }
        if link.duplicatePercent > 0 { parts.append("\(SVGCanvas.number(link.duplicatePercent))% duplicated") }
        if let reorder = link.reorder { parts.append("\(SVGCanvas.number(reorder.percent))% reordered (depth \(reorder.depth))") }
        if link.delayMs > 0 || link.jitterMs > 0 {
            parts.append(
                link.jitterMs > 0
                    ? "\(SVGCanvas.number(link.delayMs))–\(SVGCanvas.number(link.delayMs + link.jitterMs)) ms"
                    : "\(SVGCanvas.number(link.delayMs)) ms")
        }
        for blackout in link.blackouts { parts.append("blackout at \(seconds(blackout.atMs)) for \(seconds(blackout.forMs))") }
        if let udp = link.udp {
            if udp.blocked { parts.append("UDP blocked") }
            if let at = udp.blockedAtMs { parts.append("UDP blocked from \(seconds(at))") }
            if udp.lossPercent > 0 { parts.append("UDP \(SVGCanvas.number(udp.lossPercent))% lost") }
        }
        return parts.isEmpty ? "perfect" : parts.joined(separator: ", ")
    }

    static func seconds(_ ms: Double) -> String { SVGCanvas.number(ms / 1000) + " s" }

    // MARK: Panels

    static func panelTitle(_ title: String, frame: ChartFrame, on canvas: inout SVGCanvas) {
        canvas.text(title, x: frame.left, y: frame.top - 12, size: 14, weight: "bold", attributes: "class=\"panel-title\"")
    }

    private static func latencyDistribution(_ run: LabRun, on canvas: inout SVGCanvas, frame: ChartFrame) {
        canvas.open("class=\"panel\" id=\"latency-cdf\"")
        panelTitle("Latency distribution: share of all sent messages receipted within x ms", frame: frame, on: &canvas)
        let latencies = run.messages.compactMap(\.latencyMs).sorted()
        let x = ChartScale.fitting(latencies.isEmpty ? [1, 1000] : latencies, pixels: (frame.left, frame.right), logAbove: 30)
        let y = ChartScale(lower: 0, upper: 100, pixelLower: frame.bottom, pixelUpper: frame.top)
        frame.drawAxes(
            on: &canvas, x: x, y: y, xLabel: "send → receipt latency (ms)" + (x.logarithmic ? ", log scale" : ""),
            yLabel: "% of messages")
        canvas.open("class=\"series\" data-name=\"cdf\" data-points=\"\(latencies.count)\"")
        if let first = latencies.first {
            let total = Double(max(1, run.report.sent))
            var points = [(x(first), y(0))]
            for (index, latency) in latencies.enumerated() {
                points.append((x(latency), y(Double(index) / total * 100)))
                points.append((x(latency), y(Double(index + 1) / total * 100)))
            }
            canvas.polyline(points, stroke: latencyColour, width: 2)
        }
        canvas.close()
        if let latency = run.report.latency {
            canvas.open("class=\"markers\"")
            for (row, (name, value)) in [("p50", latency.p50), ("p99", latency.p99), ("max", latency.max)].enumerated() {
                canvas.line(x1: x(value), y1: frame.top, x2: x(value), y2: frame.bottom, stroke: "#555", dash: "3,3")
                // Along the bottom, where a CDF right of its own percentile never goes: right of the
                // line, or left of it near the right edge; one row each.
                let left = frame.right - x(value) < 110
                canvas.text(
                    "\(name) \(SVGCanvas.number(value)) ms", x: left ? x(value) - 4 : x(value) + 4,
                    y: frame.bottom - 8 - Double(2 - row) * 15, anchor: left ? "end" : "start", size: 11, fill: "#333")
            }
            canvas.close()
        } else {
            canvas.text(
                "no message was receipted", x: frame.left + frame.width / 2, y: frame.top + frame.height / 2,
                anchor: "middle", fill: failedColour)
        }
        canvas.close()
    }

    /// Seconds since the workload started, long enough for every send, outcome and fault.
    private static func timeScale(_ run: LabRun) -> ChartScale {
        var ends: [Double] = run.messages.flatMap { [$0.sentMs, $0.receiptedMs ?? 0, $0.failedMs ?? 0, $0.deliveredMs ?? 0] }
        ends += run.messages.flatMap { ($0.devices ?? [:]).values }
        ends += run.scenario.devices.flatMap(\.offline).map { $0.atMs + $0.forMs }
        ends += run.scenario.faults.map { $0.atMs + ($0.forMs ?? 0) }
        ends += blackouts(of: run.scenario).map { $0.window.atMs + $0.window.forMs }
        ends += run.pathChanges.map(\.atMs)
        ends += run.retransmissions.map(\.atMs)
        return ChartScale.fitting([max(1, ends.max() ?? 1) / 1000], pixels: (0, 0))
    }

    static func placed(_ scale: ChartScale, in frame: ChartFrame) -> ChartScale {
        var scale = scale
        scale.pixelLower = frame.left
        scale.pixelUpper = frame.right
        return scale
    }

    private static func latencyOverTime(_ run: LabRun, on canvas: inout SVGCanvas, frame: ChartFrame, time: ChartScale) {
        canvas.open("class=\"panel\" id=\"latency-over-time\"")
        panelTitle("Latency of each message (from its first transmission) by the time it was sent", frame: frame, on: &canvas)
        let x = placed(time, in: frame)
        let receipted = run.messages.filter { $0.latencyMs != nil }
        let unfinished = run.messages.filter { $0.fate != .receipted }
        // Messages without a receipt get a strip of their own along the top.
        let strip = unfinished.isEmpty ? 0.0 : 16
        let y = ChartScale.fitting(
            receipted.isEmpty ? [1, 1000] : receipted.map { $0.latencyMs! },
            pixels: (frame.bottom, frame.top + strip), logAbove: 30)
        frame.drawAxes(
            on: &canvas, x: x, y: y, xLabel: "time since the workload started (s)",
            yLabel: "latency (ms)" + (y.logarithmic ? ", log" : ""))
        if strip > 0 {
            canvas.rect(x: frame.left, y: frame.top, width: frame.width, height: strip, fill: "#fdecec")
            canvas.text("no receipt", x: frame.left - 7, y: frame.top + 12, anchor: "end", size: 10, fill: failedColour)
        }
        canvas.open("class=\"series\" data-name=\"latency\" data-points=\"\(receipted.count)\"")
        let radius = receipted.count > 3000 ? 1.2 : 2
        for message in receipted {
            canvas.circle(x: x(message.sentMs / 1000), y: y(message.latencyMs!), r: radius, fill: latencyColour, opacity: 0.6)
        }
        canvas.close()
        canvas.open("class=\"series\" data-name=\"failed\" data-points=\"\(unfinished.count)\"")
        for message in unfinished {
            let cx = x(message.sentMs / 1000), cy = frame.top + 8
            canvas.line(x1: cx - 3, y1: cy - 3, x2: cx + 3, y2: cy + 3, stroke: failedColour, width: 1.5)
            canvas.line(x1: cx - 3, y1: cy + 3, x2: cx + 3, y2: cy - 3, stroke: failedColour, width: 1.5)
        }
        canvas.close()
        impairments(run, on: &canvas, frame: frame, x: x)
        legend(
            [("receipted message", latencyColour), ("failed / no outcome (× in the top strip)", failedColour)]
                + impairmentLegend(run), on: &canvas, x: frame.left, y: frame.bottom + 52)
        canvas.close()
    }

    private static func retransmissionsOverTime(_ run: LabRun, on canvas: inout SVGCanvas, frame: ChartFrame, time: ChartScale) {
        canvas.open("class=\"panel\" id=\"retransmissions\"")
        let x = placed(time, in: frame)
        // Bins no finer than twice the timeline's sampling (real mode), or some would stay empty.
        let binSeconds = ChartScale.niceStep(max(x.upper / 80, 2 * run.timelineResolutionMs / 1000))
        var bins = [Int](repeating: 0, count: Int((x.upper / binSeconds).rounded(.up)) + 1)
        for event in run.retransmissions {
            bins[min(bins.count - 1, max(0, Int(event.atMs / 1000 / binSeconds)))] += event.count
        }
        let binLabel = SVGCanvas.number(binSeconds < 1 ? binSeconds * 1000 : binSeconds) + (binSeconds < 1 ? " ms" : " s")
        panelTitle("Retransmissions over time (per \(binLabel))", frame: frame, on: &canvas)
        let y = ChartScale.fitting(bins.map(Double.init) + [1], pixels: (frame.bottom, frame.top))
        frame.drawAxes(on: &canvas, x: x, y: y, xLabel: "time since the workload started (s)", yLabel: "retransmissions")
        let total = run.retransmissions.reduce(0) { $0 + $1.count }
        canvas.open("class=\"series\" data-name=\"retransmissions\" data-points=\"\(total)\"")
        for (index, count) in bins.enumerated() where count > 0 {
            let left = x(Double(index) * binSeconds), right = x(Double(index + 1) * binSeconds)
            canvas.rect(
                x: left, y: y(Double(count)), width: max(1, right - left - 0.5), height: frame.bottom - y(Double(count)),
                fill: retransmitColour)
        }
        canvas.close()
        impairments(run, on: &canvas, frame: frame, x: x)
        if total == 0 {
            canvas.text("no retransmissions", x: frame.left + frame.width / 2, y: frame.top + frame.height / 2, anchor: "middle", fill: "#555")
        }
        canvas.close()
    }

    static func legend(_ entries: [(String, String)], on canvas: inout SVGCanvas, x: Double, y: Double) {
        var left = x
        canvas.open("class=\"legend\"")
        for (label, colour) in entries {
            canvas.rect(x: left, y: y - 9, width: 10, height: 10, fill: colour)
            canvas.text(label, x: left + 14, y: y, size: 11)
            left += 24 + Double(label.count) * 6.2
        }
        canvas.close()
    }
}
