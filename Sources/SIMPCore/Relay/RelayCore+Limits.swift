import NIOCore

/// Caps on what one user may keep in the store (docs/OPERATIONS.md §10): the store checks them
/// atomically where the state lives and answers `.limitReached` instead of carrying a request
/// out; the user is told why with ERROR LIMIT_REACHED.
extension RelayCore {
    /// The store refused `request` because it would take its user past a cap.
    mutating func limitReached(_ request: StoreRequest, _ reason: String, now: NIODeadline, into output: inout [RelayAction]) {
        switch request {
        case .register(let registration, let connection):
            output.append(.reject(.limitReached, detail: "login of \(registration.user) device \(registration.device): \(reason)"))
            guard case .registering = connections.phase(of: connection) else { return } // closed meanwhile
            endSession(on: connection, .connectionClosed, now: now, into: &output) // never connected; nothing was written
            output += [.send(connection, .error(.limitReached, reason)), .close(connection)]
        case .publishKeys(let keys):
            output += [
                .reject(.limitReached, detail: "KEYS_PUBLISH of \(keys.user) device \(keys.device): \(reason)"),
                .send(keys.connection, .error(.limitReached, reason, messageId: keys.messageId)),
            ]
        default:
            output.append(.reject(.limitReached, detail: "\(request): \(reason)"))
        }
    }

    /// The text of a refusal for a user at `RelayLimits.maxDevicesPerUser`.
    public static func tooManyDevicesText(device: String, limit: Int) -> String {
        "this user already has \(limit) devices, the relay's limit: device \"\(device)\" is not added "
            + "(a device unused for the inbox TTL is forgotten; an operator can raise --max-devices-per-user)"
    }
}

/// Caps on connections per address, judged as a connection is accepted.
extension RelayCore {
    /// A control connection from `host` was accepted and is not set up yet: true (the refusal
    /// counted in `output`) when it is to be closed at once, without a word, because `host`
    /// already holds its cap of connections or of connections not logged in. A flood of
    /// connections from one address then costs the relay an accept and a close each, not a
    /// connection's setup, an ERROR and a close (`connectionOpened` refuses the same way, with
    /// an ERROR, what gets past this).
    public func refusesAccepted(from host: String, into output: inout [RelayAction]) -> Bool {
        guard let refusal = connections.refusal(for: host) else { return false }
        output.append(.reject(refusal.reason, detail: "a connection from \(host) closed as accepted: \(refusal.detail)"))
        return true
    }
}
