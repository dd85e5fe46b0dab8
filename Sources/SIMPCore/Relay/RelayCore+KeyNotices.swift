import NIOCore

/// Who is told of a device's new key bundle (docs/PROTOCOL.md §4.8, "New devices"): the users
/// who fetched the user's bundles lately (their device lists are stale: the next message to
/// the user fetches again, so the new device can read it) and the user's own other sessions
/// here (the user learns that its account logged in from a new device, and from where).
extension RelayCore {
    /// How long a KEYS_FETCH makes its asker a watcher of the user's bundles: longer than the
    /// reference client keeps a fetched device list (5 minutes).
    public static let keyWatchPeriod: TimeAmount = .minutes(10)

    /// The store kept a new or changed bundle of `request.user`'s device: a KEYS_PUBLISH notice
    /// (messageId 0) goes to each watcher and to the user's other sessions on this relay.
    mutating func tellOfNewKeys(
        _ request: KeysPublish, _ change: KeysPublish.Change, watchers: [String], now: NIODeadline, into output: inout [RelayAction]
    ) {
        var notice = SIMPMessage(kind: .keysPublish, fromUser: request.user)
        notice.device = request.device
        for watcher in Set(watchers + [request.user]).sorted() {
            notice.toUser = watcher
            notice.loginAddress = watcher == request.user && change == .newDevice ? loginAddress(of: request.connection) : ""
            guard sessions.contains(watcher) else {
                routeRemote(.control(notice), to: watcher, now: now, into: &output)
                continue
            }
            for connection in sessions.connections(of: watcher) where connection != request.connection {
                output.append(.send(connection, notice))
            }
        }
    }

    /// The IP address the session on `connection` registered from ("" if unknown).
    private func loginAddress(of connection: ConnectionID) -> String {
        guard let session = connections.session(on: connection), let registration = sessions.registration(ofSession: session) else { return "" }
        return registration.route.address.ipAddress ?? ""
    }

    /// Below this many one-time prekeys left after a fetch claimed one, the device is asked to
    /// publish more (the reference client keeps 20 and tops up below 10).
    public static let fewPrekeysLeft = 5

    /// A fetch of `request.user`'s bundles was answered: when it found none for a user who
    /// exists (the store lost them, or the user never logged in), the user's sessions are asked
    /// to publish again, and so is each device whose one-time prekeys run low. The request is a
    /// KEYS_FETCH notice (`messageId` 0, `toUser` the user, `device` the device asked, empty for
    /// all; PROTOCOL §4.8, "Publishing"), sent to the user's sessions here or routed like
    /// PRESENCE to the relays holding them; a user connected nowhere is not told.
    mutating func askToPublish(
        after request: KeysFetch, _ devices: [DeviceKeys], known: Bool, now: NIODeadline, into output: inout [RelayAction]
    ) {
        guard request.asker != request.user else { return } // a device checking its own user's devices
        var asked: [(device: String, left: Int)] = devices.isEmpty && known ? [("", 0)] : []
        for keys in devices { if let left = keys.prekeysLeft, left < Self.fewPrekeysLeft { asked.append((keys.device, left)) } }
        for (device, left) in asked {
            var notice = SIMPMessage(kind: .keysFetch, toUser: request.user)
            notice.device = device
            notice.prekeysLeft = UInt32(left)
            guard sessions.contains(request.user) else {
                routeRemote(.control(notice), to: request.user, now: now, into: &output)
                continue
            }
            for connection in sessions.connections(of: request.user) { output.append(.send(connection, notice)) }
        }
    }
}
