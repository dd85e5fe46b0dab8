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
        guard let session = sessions.session(on: connection), let registration = sessions.registration(ofSession: session) else { return "" }
        return registration.route.address.ipAddress ?? ""
    }
}
