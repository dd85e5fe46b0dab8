/// Whose access links a command-line link setting changes.
public enum LinkSide: String, CaseIterable, Sendable {
    case sender, receiver, both

    var includesSenders: Bool { self != .receiver }
    var includesReceivers: Bool { self != .sender }
}

/// `simp-lab replay --udp-blocked WHO [--udp-blocked-at MS] --udp-throttled PERCENT
/// [--udp-throttled-on WHO]`: UDP blocked or throttled on some clients' links, both directions,
/// over whatever the scenario's links already do (TCP untouched).
public struct UDPOverride: Equatable, Sendable {
    /// Whose datagrams are all dropped, and from when (nil: from the start).
    public var blocked: LinkSide?
    public var blockedAtMs: Double?
    /// Whose datagrams are lost with `throttledPercent`.
    public var throttled: LinkSide?
    public var throttledPercent: Double = 0

    public init(blocked: LinkSide? = nil, blockedAtMs: Double? = nil, throttled: LinkSide? = nil, throttledPercent: Double = 0) {
        self.blocked = blocked
        self.blockedAtMs = blockedAtMs
        self.throttled = throttled
        self.throttledPercent = throttledPercent
    }

    /// Whether it changes anything.
    public var isEmpty: Bool { blocked == nil && throttled == nil }

    /// `scenario` with the setting applied to the senders' links, the receivers' links and the
    /// links of the receivers' devices that have their own.
    public func applied(to scenario: Scenario) -> Scenario {
        var scenario = scenario
        guard !isEmpty else { return scenario }
        scenario.senderLink = applied(to: scenario.senderAccess, senders: true)
        scenario.receiverLink = applied(to: scenario.receiverAccess, senders: false)
        if let devices = scenario.receiverDevices {
            scenario.receiverDevices = devices.map { device in
                var device = device
                device.link = device.link.map { applied(to: $0, senders: false) }
                return device
            }
        }
        return scenario
    }

    private func applied(to link: AccessLink, senders: Bool) -> AccessLink {
        AccessLink(up: applied(to: link.up, senders: senders), down: applied(to: link.down, senders: senders))
    }

    private func applied(to conditions: LinkConditions, senders: Bool) -> LinkConditions {
        func covers(_ side: LinkSide?) -> Bool {
            guard let side else { return false }
            return senders ? side.includesSenders : side.includesReceivers
        }
        var conditions = conditions
        var filter = conditions.udp ?? LinkConditions.UDPFilter()
        if covers(blocked) {
            filter.blocked = blockedAtMs == nil
            filter.blockedAtMs = blockedAtMs
        }
        if covers(throttled) { filter.lossPercent = throttledPercent }
        if filter != LinkConditions.UDPFilter() { conditions.udp = filter }
        return conditions
    }
}
