/// Deliveries counted at one receiving device's application.
public struct DeviceCounts: Equatable, Sendable {
    /// Distinct messages handed to the device's application.
    public var delivered = 0
    /// Extra deliveries of a message the device already had (across its processes).
    public var duplicates = 0
    /// Deliveries after a later message of the same conversation.
    public var outOfOrder = 0
}

/// How one receiving device fared, summed over the receiver users that have it: every message
/// to its user must reach it once and in order, unless its sender was told it failed.
public struct DeviceReport: Codable, Equatable, Sendable {
    /// The device's name (`default` for the user's default device).
    public var device: String
    /// Messages sent to the device's users.
    public var expected = 0
    public var delivered = 0
    public var duplicates = 0
    public var outOfOrder = 0
    /// Messages to the device's users reported failed to their senders.
    public var failed = 0
    /// Messages to the device's users that never reached it and were not reported failed.
    public var missing = 0
    /// Messages the device got that were also reported failed to their senders.
    public var deliveredAndFailed = 0
    /// Send → delivery at this device, in ms: median and maximum (nil before any delivery).
    public var deliveryP50Ms: Double?
    public var deliveryMaxMs: Double?

    public init(device: String) { self.device = device }

    private enum CodingKeys: String, CodingKey {
        case device, expected, delivered, duplicates, outOfOrder = "out_of_order", failed, missing
        case deliveredAndFailed = "delivered_and_failed", deliveryP50Ms = "delivery_p50_ms", deliveryMaxMs = "delivery_max_ms"
    }

    /// One report per device of `devices` (names in the order the scenario declares them).
    static func reports(
        devices: [String], trackedUsers: Set<String>, counts: [String: DeviceCounts],
        messages: [MessageRecord]
    ) -> [DeviceReport] {
        let toTracked = messages.filter { trackedUsers.contains($0.to) }
        return devices.map { device in
            var report = DeviceReport(device: device.isEmpty ? "default" : device)
            let count = counts[device] ?? DeviceCounts()
            report.delivered = count.delivered
            report.duplicates = count.duplicates
            report.outOfOrder = count.outOfOrder
            var delays: [Double] = []
            for message in toTracked {
                report.expected += 1
                let failed = message.fate.isFailure
                let deliveredAt = message.devices?[device]
                if failed { report.failed += 1 }
                if failed, deliveredAt != nil { report.deliveredAndFailed += 1 }
                if !failed, deliveredAt == nil { report.missing += 1 }
                if let deliveredAt { delays.append(deliveredAt - message.sentMs) }
            }
            delays.sort()
            if !delays.isEmpty {
                report.deliveryP50Ms = ((delays[(delays.count - 1) / 2]) * 10).rounded() / 10
                report.deliveryMaxMs = (delays.last! * 10).rounded() / 10
            }
            return report
        }
    }

    /// This device's bars: nothing missing, duplicated, reordered, or delivered and failed.
    var bars: [Bar] {
        [
            ("missing", missing), ("duplicates", duplicates), ("out_of_order", outOfOrder),
            ("delivered_and_failed", deliveredAndFailed),
        ].map { name, value in
            Bar(name: "\(device).\(name)", limit: 0, value: Double(value), passed: value == 0)
        }
    }
}
