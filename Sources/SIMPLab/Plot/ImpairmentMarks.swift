/// What happened to the links and the relay, drawn over the time panels of a run: blackouts,
/// UDP blocked, faults, and when clients' datagrams moved to the control connection and back.
/// The legend names only the marks the run has.
extension LabPlot {
    /// The blackout windows of a scenario's links, each with the links it covers.
    static func blackouts(of scenario: Scenario) -> [(window: LinkConditions.Blackout, links: [String])] {
        grouped(directions(of: scenario).flatMap { name, link in link.blackouts.map { ($0, name) } })
    }

    /// When UDP stops on a scenario's links (from the start, or from `blockedAtMs`, for good),
    /// each with the links it covers.
    static func udpBlocked(of scenario: Scenario) -> [(fromMs: Double, links: [String])] {
        grouped(
            directions(of: scenario).compactMap { name, link in
                guard let udp = link.udp, udp.blocked || udp.blockedAtMs != nil else { return nil }
                return (udp.blockedAtMs ?? 0, name)
            }
        ).map { (fromMs: $0.window, links: $0.links) }
    }

    private static func directions(of scenario: Scenario) -> [(String, LinkConditions)] {
        [
            ("senders up", scenario.senderAccess.up), ("senders down", scenario.senderAccess.down),
            ("receivers up", scenario.receiverAccess.up), ("receivers down", scenario.receiverAccess.down),
        ]
    }

    /// Equal windows merged, with every link they are on, in first-seen order.
    private static func grouped<Window: Equatable>(_ marks: [(Window, String)]) -> [(window: Window, links: [String])] {
        var windows: [(window: Window, links: [String])] = []
        for (window, link) in marks {
            if let index = windows.firstIndex(where: { $0.window == window }) {
                windows[index].links.append(link)
            } else {
                windows.append((window, [link]))
            }
        }
        return windows
    }

    private static func linkNames(_ links: [String]) -> String { links.count == 4 ? "all links" : links.joined(separator: ", ") }

    /// The legend entries of the marks `impairments` draws for `run`.
    static func impairmentLegend(_ run: LabRun) -> [(String, String)] {
        var entries: [(String, String)] = []
        if !blackouts(of: run.scenario).isEmpty { entries.append(("blackout", blackoutColour)) }
        if !udpBlocked(of: run.scenario).isEmpty { entries.append(("UDP blocked", udpBlockedColour)) }
        if !run.scenario.faults.isEmpty { entries.append(("fault", faultColour)) }
        if !run.pathChanges.isEmpty { entries.append(("a client's datagrams move (UDP ⇄ control connection)", pathColour)) }
        return entries
    }

    static func impairments(_ run: LabRun, on canvas: inout SVGCanvas, frame: ChartFrame, x: ChartScale) {
        let scenario = run.scenario
        for (window, links) in blackouts(of: scenario) {
            let left = x(window.atMs / 1000), right = x((window.atMs + window.forMs) / 1000)
            canvas.open("class=\"impairment\" data-kind=\"blackout\"")
            canvas.rect(x: left, y: frame.top, width: max(1, right - left), height: frame.height, fill: blackoutColour, opacity: 0.22)
            canvas.text("blackout: \(linkNames(links))", x: left + 3, y: frame.bottom - 6, size: 10, fill: "#444")
            canvas.close()
        }
        for (index, (fromMs, links)) in udpBlocked(of: scenario).enumerated() {
            let left = x(fromMs / 1000)
            canvas.open("class=\"impairment\" data-kind=\"udp-blocked\"")
            canvas.rect(
                x: left, y: frame.top, width: max(1, frame.right - left), height: frame.height, fill: udpBlockedColour, opacity: 0.18)
            canvas.text(
                "UDP blocked: \(linkNames(links))", x: frame.right - 4, y: frame.top + 14 + Double(index) * 12, anchor: "end", size: 10,
                fill: "#555")
            canvas.close()
        }
        for (index, fault) in scenario.faults.enumerated() {
            let at = x(fault.atMs / 1000)
            canvas.open("class=\"fault\" data-kind=\"\(fault.kind.rawValue)\"")
            if let forMs = fault.forMs, forMs > 0, fault.kind == .restartRelay || fault.kind == .restartRedis {
                canvas.rect(
                    x: at, y: frame.top, width: max(1, x((fault.atMs + forMs) / 1000) - at), height: frame.height,
                    fill: faultColour, opacity: 0.12)
            }
            canvas.line(x1: at, y1: frame.top, x2: at, y2: frame.bottom, stroke: faultColour, width: 1.5, dash: "5,3")
            canvas.text(fault.kind.rawValue, x: at + 3, y: frame.top + 26 + Double(index % 3) * 12, size: 10, fill: faultColour)
            canvas.close()
        }
        pathChanges(run.pathChanges, on: &canvas, frame: frame, x: x)
    }

    /// A line where each client's datagrams moved; the first move each way, and each later one
    /// a second or more after the last labelled, is labelled with how many clients moved then.
    private static func pathChanges(_ changes: [PathChange], on canvas: inout SVGCanvas, frame: ChartFrame, x: ChartScale) {
        var labelled: [Bool: Double] = [:]
        for (index, change) in changes.enumerated() {
            let at = x(change.atMs / 1000)
            canvas.open("class=\"path-switch\" data-to=\"\(change.toControl ? "control" : "udp")\" data-at-ms=\"\(SVGCanvas.number(change.atMs))\"")
            canvas.line(x1: at, y1: frame.top, x2: at, y2: frame.bottom, stroke: pathColour, width: 1.5, dash: "2,2")
            if labelled[change.toControl].map({ change.atMs - $0 >= 1000 }) ?? true {
                labelled[change.toControl] = change.atMs
                let clients = changes[index...].prefix { $0.atMs - change.atMs < 1000 }.filter { $0.toControl == change.toControl }.count
                let what = change.toControl ? "to the control connection" : "back to UDP"
                let text = "datagrams \(what) (\(clients) client\(clients == 1 ? "" : "s"))"
                let nearRight = frame.right - at < Double(text.count) * 6 // then left of the line
                canvas.text(
                    text, x: nearRight ? at - 3 : at + 3, y: frame.top + 14 + (change.toControl ? 0 : 12), anchor: nearRight ? "end" : "start",
                    size: 10, fill: "#0e7c86")
            }
            canvas.close()
        }
    }
}
