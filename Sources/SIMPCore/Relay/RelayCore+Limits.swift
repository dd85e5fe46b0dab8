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
            guard case .registering = connections.phase(of: connection), let session = sessions.session(on: connection) else {
                return // closed meanwhile
            }
            connections.setPhase(.awaitingLogin, of: connection, now: now)
            endSession(session, withdraw: false, into: &output) // nothing was written
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
