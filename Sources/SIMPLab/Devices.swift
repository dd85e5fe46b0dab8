/// A receiving device of every receiver user (docs/PROTOCOL.md §4.7): its own client, logged in
/// with `device` = `name`, online from the start except in its `offline` windows, in which its
/// process is stopped (it says DISCONNECT and is gone) and then started afresh.
public struct ReceiverDevice: Codable, Equatable, Sendable {
    public var name: String
    /// The device's access link instead of the receivers' one.
    public var link: AccessLink?
    /// When the device's process is not running, relative to the start of the workload.
    public var offline: [LinkConditions.Blackout] = []

    public init(name: String, link: AccessLink? = nil, offline: [LinkConditions.Blackout] = []) {
        self.name = name
        self.link = link
        self.offline = offline
    }

    private enum CodingKeys: String, CodingKey, CaseIterable { case name, link, offline }

    public init(from decoder: Decoder) throws {
        try decoder.rejectUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        link = try c.decodeIfPresent(AccessLink.self, forKey: .link)
        offline = try c.decodeIfPresent([LinkConditions.Blackout].self, forKey: .offline) ?? []
        guard !name.isEmpty, name.utf8.count <= 64 else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: decoder.codingPath + [CodingKeys.name],
                    debugDescription: "a device name is 1 to 64 bytes"))
        }
        let windows = offline.sorted { $0.atMs < $1.atMs }
        for (earlier, later) in zip(windows, windows.dropFirst()) where earlier.atMs + earlier.forMs >= later.atMs {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: decoder.codingPath + [CodingKeys.offline],
                    debugDescription: "offline windows must not overlap or touch"))
        }
        offline = windows
    }
}

/// A one-shot send-only session of every receiver user (like `simp send`): at `atMs` it logs in
/// with `sendOnly` on `device`, sends `messages` messages to a sender (receiver *i* writes to
/// sender *i* mod `senders`), waits for their outcomes and leaves.
public struct SendOnlySession: Codable, Equatable, Sendable {
    public var atMs: Double
    public var messages = 1
    /// The device it runs on: by default the receiver's first device (the same machine as a
    /// `simp listen`), so it must neither replace that device's session nor take its stored messages.
    public var device: String?

    public init(atMs: Double, messages: Int = 1, device: String? = nil) {
        self.atMs = atMs
        self.messages = messages
        self.device = device
    }

    private enum CodingKeys: String, CodingKey, CaseIterable { case atMs, messages, device }

    public init(from decoder: Decoder) throws {
        try decoder.rejectUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        atMs = try c.decodeRequired(.atMs, in: StrictDecoding.nonNegative)
        messages = try c.decode(.messages, in: 1...10_000, default: 1)
        device = try c.decodeIfPresent(String.self, forKey: .device)
    }
}

extension Scenario {
    /// The receiving devices of each receiver user: the declared ones, or one default device
    /// (`device` "", always online) when the scenario declares none.
    public var devices: [ReceiverDevice] { receiverDevices ?? [ReceiverDevice(defaultDevice: ())] }

    /// The access link of a receiving device.
    public func access(of device: ReceiverDevice) -> AccessLink { device.link ?? receiverAccess }

    /// The device a send-only session runs on.
    public func device(of session: SendOnlySession) -> String { session.device ?? devices[0].name }

    /// Every message of the run: the workload's and the send-only sessions'.
    public var totalMessages: Int {
        workload.messages * workload.senders + sendOnlySessions.reduce(0) { $0 + $1.messages } * workload.receivers
    }

    func validateDevices() throws {
        guard let receiverDevices else { return }
        guard !receiverDevices.isEmpty else { throw LabError("receiverDevices: give at least one device, or leave it out") }
        let names = receiverDevices.map(\.name)
        if let twice = names.first(where: { name in names.filter { $0 == name }.count > 1 }) {
            throw LabError("receiverDevices: device \"\(twice)\" is named twice")
        }
    }
}

extension ReceiverDevice {
    /// The user's default device (`device` field empty), always online.
    init(defaultDevice: Void) { self.init(name: "") }

    /// The name shown in reports: the default device has none of its own.
    public var label: String { name.isEmpty ? "default" : name }
}

/// One client of a run, in either mode: a sender, a receiver's device, or a receiver's one-shot
/// send-only session.
struct LabMember {
    /// The user's base name (`sender1`, `receiver2`; real mode appends the seed).
    var user: String
    var isSender: Bool
    var device = ""
    var access: AccessLink
    /// When the device's process is stopped.
    var offline: [LinkConditions.Blackout] = []
    /// For a send-only session: when it runs, how many messages, and to whom.
    var oneShot: (session: SendOnlySession, to: String)?

    var sendOnly: Bool { oneShot != nil }
}

extension Scenario {
    /// The receiver users' base names.
    var receiverUsers: [String] { (1...workload.receivers).map { "receiver\($0)" } }

    /// Every client of a run: the senders, each receiver's devices, then each receiver's
    /// send-only sessions (the order fixes their links' random streams).
    var members: [LabMember] {
        var members = (1...workload.senders).map { LabMember(user: "sender\($0)", isSender: true, access: senderAccess) }
        for user in receiverUsers {
            members += devices.map { LabMember(user: user, isSender: false, device: $0.name, access: access(of: $0), offline: $0.offline) }
        }
        for (index, user) in receiverUsers.enumerated() {
            for session in sendOnlySessions {
                let to = "sender\(index % workload.senders + 1)"
                let access = devices.first { $0.name == device(of: session) }.map(access(of:)) ?? receiverAccess
                members.append(LabMember(user: user, isSender: false, device: device(of: session), access: access, oneShot: (session, to)))
            }
        }
        return members
    }
}
