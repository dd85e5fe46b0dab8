import NIOCore

/// The one way store answers come back: each `.store` request the core made is answered here,
/// successes and failures alike, and the part that asked decides what follows.
extension RelayCore {
    /// The store answered `request` (made by this core as `.store(request)`).
    public mutating func storeAnswered(
        _ request: StoreRequest, _ result: Result<StoreAnswer, StoreFailure>, now: NIODeadline, into output: inout [RelayAction]
    ) {
        switch request {
        case .fetchVerifier(_, let connection):
            let step: RelayLogin.Step
            switch result {
            case .success(.verifier(let verifier, let locked, let counts)):
                step = login.verifierFetched(verifier, locked: locked, iterationCounts: counts, on: connection, entropy: &entropy)
            case .success(let other): step = login.verifierFetchFailed(on: connection, StoreFailure("unexpected answer \(other)"))
            case .failure(let failure): step = login.verifierFetchFailed(on: connection, failure)
            }
            guard case .actions(let actions) = step else { return } // a verifier only ever leads to a challenge
            output += actions
        case .register(_, let connection):
            registered(on: connection, result, now: now, into: &output)
        case .lookup(let user):
            lookedUp(user, result, now: now, into: &output)
        case .publish(let relay, let delivery):
            published(to: relay, delivery, result, into: &output)
        case .checkSession(let user, let session):
            sessionChecked(user: user, session: session, result, into: &output)
        case .storeInInbox(let user, let message):
            inboxStored(user: user, message: message, result, now: now, into: &output)
        case .loadInbox(let user, let device):
            inboxLoaded(Recipient(user: user, device: device), result, now: now, into: &output)
        case .room(let roomRequest):
            roomAnswered(roomRequest, result, into: &output)
        case .postToRoom(let room, let message):
            roomPosted(room: room, message: message, result, into: &output)
        case .countRoomDelivery(let copy):
            roomDeliveryCounted(copy: copy, result, now: now, into: &output)
        case .recordPresence(let user, let online):
            presenceRecorded(user: user, online: online, result, now: now, into: &output)
        case .who(let whoRequest):
            whoAnswered(whoRequest, result, into: &output)
        case .publishKeys(let keysPublish):
            keysPublished(keysPublish, result, into: &output)
        case .fetchKeys(let keysFetch):
            keysFetched(keysFetch, result, into: &output)
        case .unregister, .moveRoute, .refresh, .withdraw, .announceMove, .removeFromInbox:
            break // writes whose failure leaves nothing to tell anyone: expiry cleans up after them
        }
    }
}
