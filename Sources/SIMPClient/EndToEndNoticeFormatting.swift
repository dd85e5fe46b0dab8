import Foundation

/// How `simp send` and `simp listen` tell the user of end-to-end news (docs/E2E.md §10):
/// a line for standard error, or a JSON event for `simp listen --json`.
extension EndToEndNotice {
    /// The line for standard error (`simp: …`); nil for news only a chat shows (a peer's
    /// session restarted, a message asked for or sent again).
    public var errorLine: String? {
        switch self {
        case .peer(.sessionRestarted), .askedAgain, .resent(_, _, _, true), .restoredSessionReplaced, .stateWritableAgain: nil
        case .ownNewDevice:
            "simp: WARNING: \(description); if it was not you, do not approve it and change your password: people who know "
                + "your user key send it nothing until you approve it, anyone else may"
        default: "simp: \(description)"
        }
    }

    /// The name of this kind of news in a JSON event (`"event"`).
    public var eventName: String {
        switch self {
        case .peer(.newDevice): "newDevice"
        case .peer(.deviceKeyChanged), .safetyNumberChanged: "safetyNumberChanged"
        case .peer(.sessionRestarted): "sessionRestarted"
        case .undecryptable: "undecryptable"
        case .ownNewDevice: "ownNewDevice"
        case .verifiedKeyChanged: "verifiedKeyChanged"
        case .askedAgain: "askedAgain"
        case .resent: "resent"
        case .waitingForFirstLogin: "waitingForFirstLogin"
        case .restoredSessionReplaced: "restoredSessionReplaced"
        case .stateUnwritable: "stateUnwritable"
        case .stateWritableAgain: "stateWritableAgain"
        case .unusableKeys, .noUsableKeys: "unusableKeys"
        case .resendRefused: "resendRefused"
        case .roomJoinNotAdmitted: "roomJoinNotAdmitted"
        case .roomAdmitted: "roomAdmitted"
        case .unapprovedDevice: "unapprovedDevice"
        case .userKeyChanged: "userKeyChanged"
        case .deviceListWithdrawn: "deviceListWithdrawn"
        case .ownDeviceNotApproved: "ownDeviceNotApproved"
        case .keyDirectoryForked: "keyDirectoryForked"
        case .keyDirectoryRefused: "keyDirectoryRefused"
        }
    }

    /// The JSON event for `simp listen --json`: `{"event": NAME, "text": …}` and the fields
    /// the news has (`user`, `device`, `number`, `room`, `id`, `by`).
    public var jsonLine: String {
        var object: [String: Any] = ["event": eventName, "text": description]
        switch self {
        case .peer(.newDevice(let user, let device)), .peer(.deviceKeyChanged(let user, let device)), .peer(.sessionRestarted(let user, let device)):
            (object["user"], object["device"]) = (user, device)
        case .safetyNumberChanged(let user, let device, let number): (object["user"], object["device"], object["number"]) = (user, device, number)
        case .undecryptable(let user, let id, _): (object["user"], object["id"]) = (user, id)
        case .ownNewDevice(let device, let address): (object["device"], object["address"]) = (device, address)
        case .verifiedKeyChanged(let user), .waitingForFirstLogin(let user), .userKeyChanged(let user), .deviceListWithdrawn(let user, _),
            .keyDirectoryForked(let user), .keyDirectoryRefused(let user, _):
            object["user"] = user
        case .unapprovedDevice(let user, let device): (object["user"], object["device"]) = (user, device)
        case .ownDeviceNotApproved(let device, let code):
            object["device"] = device
            if let code { object["code"] = code }
        case .askedAgain(let user, let device, let id), .resent(let user, let device, let id, _), .resendRefused(let user, let device, let id):
            (object["user"], object["device"], object["id"]) = (user, device, id)
        case .restoredSessionReplaced(let user, let device), .unusableKeys(let user, let device, _):
            (object["user"], object["device"]) = (user, device)
        case .noUsableKeys(let user, let room), .roomJoinNotAdmitted(let user, let room): (object["user"], object["room"]) = (user, room)
        case .roomAdmitted(let user, let room, let by): (object["user"], object["room"], object["by"]) = (user, room, by)
        case .stateUnwritable, .stateWritableAgain: break
        }
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self)
    }
}
