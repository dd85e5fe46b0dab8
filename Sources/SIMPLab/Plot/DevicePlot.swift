/// The per-device part of a run's picture: a header line per device, and a panel of each
/// message's delivery delay at each device by the time it was sent, with the devices' offline
/// windows and the one-shot sessions marked.
extension LabPlot {
    /// Colours of the devices' series, in the order the scenario declares them.
    static let deviceColours = ["#2ca02c", "#9467bd", "#17becf", "#bcbd22", "#e377c2", "#8c564b"]
    /// The height the devices panel adds to the picture.
    static let devicePanelHeight = 300.0

    /// "phone: 400 delivered of 400, 0 duplicates, …" for each device.
    static func deviceLines(_ report: ScenarioReport) -> [String] {
        (report.devices ?? []).map { device in
            "device \(device.device): \(device.delivered) delivered of \(device.expected), \(device.missing) missing, "
                + "\(device.duplicates) duplicates, \(device.outOfOrder) out of order, \(device.deliveredAndFailed) delivered and failed"
        }
    }

    /// "devices: phone; laptop offline at 1 s for 2 s; one-shot send-only session at 1.5 s (3 messages, laptop)".
    static func describeDevices(_ scenario: Scenario) -> String? {
        guard let devices = scenario.receiverDevices else { return nil }
        var parts = devices.map { device in
            device.name + device.offline.map { " offline at \(seconds($0.atMs)) for \(seconds($0.forMs))" }.joined(separator: ",")
        }
        parts += scenario.sendOnlySessions.map { session in
            "one-shot send-only session at \(seconds(session.atMs)) (\(session.messages) message\(session.messages == 1 ? "" : "s"), "
                + "device \(scenario.device(of: session)))"
        }
        return "receiver devices: " + parts.joined(separator: "; ")
    }

    static func deliveryPerDevice(_ run: LabRun, on canvas: inout SVGCanvas, frame: ChartFrame, time: ChartScale) {
        guard let devices = run.scenario.receiverDevices else { return }
        canvas.open("class=\"panel\" id=\"device-delivery\"")
        panelTitle("Send → delivery at each device, by the time the message was sent", frame: frame, on: &canvas)
        let x = placed(time, in: frame)
        let delays = run.messages.flatMap { message in (message.devices ?? [:]).values.map { $0 - message.sentMs } }
        let y = ChartScale.fitting(
            delays.isEmpty ? [1, 1000] : delays.map { max($0, 0.1) }, pixels: (frame.bottom, frame.top),
            logAbove: 30)
        frame.drawAxes(
            on: &canvas, x: x, y: y, xLabel: "time since the workload started (s)",
            yLabel: "delivery (ms)" + (y.logarithmic ? ", log" : ""))
        for (index, device) in devices.enumerated() {
            let colour = deviceColours[index % deviceColours.count]
            let points = run.messages.compactMap { message in message.devices?[device.name].map { (message.sentMs, $0 - message.sentMs) } }
            canvas.open("class=\"series\" data-name=\"device \(device.name)\" data-points=\"\(points.count)\"")
            for (sent, delay) in points {
                canvas.circle(x: x(sent / 1000), y: y(max(delay, 0.1)), r: points.count > 3000 ? 1.2 : 2, fill: colour, opacity: 0.6)
            }
            canvas.close()
            for window in device.offline {
                let left = x(window.atMs / 1000), right = x((window.atMs + window.forMs) / 1000)
                canvas.open("class=\"impairment\" data-kind=\"offline\"")
                canvas.rect(x: left, y: frame.top, width: max(1, right - left), height: frame.height, fill: colour, opacity: 0.15)
                canvas.text("\(device.name) offline", x: left + 3, y: frame.top + 14 + Double(index % 3) * 12, size: 10, fill: colour)
                canvas.close()
            }
        }
        for session in run.scenario.sendOnlySessions {
            let at = x(session.atMs / 1000)
            canvas.open("class=\"fault\" data-kind=\"sendOnlySession\"")
            canvas.line(x1: at, y1: frame.top, x2: at, y2: frame.bottom, stroke: faultColour, width: 1.5, dash: "2,2")
            canvas.text("one-shot send", x: at + 3, y: frame.bottom - 8, size: 10, fill: faultColour)
            canvas.close()
        }
        let entries = devices.enumerated().map { ("\($1.name)", deviceColours[$0 % deviceColours.count]) }
        let oneShot = run.scenario.sendOnlySessions.isEmpty ? [] : [("one-shot send-only session", faultColour)]
        legend(entries + oneShot, on: &canvas, x: frame.left, y: frame.bottom + 52)
        canvas.close()
    }
}
