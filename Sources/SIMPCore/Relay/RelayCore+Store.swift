import NIOCore

/// The one way store answers come back: each `.store` request the core made is answered here,
/// by its own kind of answer or by a failure, and the part that asked decides what follows.
extension RelayCore {
    /// The store carried out a request this core made as `.store(request)`; `answer` is the
    /// case of the request's name.
    public mutating func storeAnswered(_ answer: StoreAnswer, now: NIODeadline, into output: inout [RelayAction]) {
        defer { requestSettled(on: answer.controlConnection, into: &output) }
        if case .fetchVerifier(let connection, _, let locked, _, let failures, let deniedBefore) = answer,
            tokenUserFetched(on: connection, locked: locked, deniedBefore: deniedBefore, shared: failures, now: now, into: &output)
        {
            return // a token login's or refresh's answer
        }
        switch answer {
        case .fetchVerifier(let connection, let verifier, let locked, let counts, let failures, _):
            verifierFetched(on: connection, into: &output) {
                $0.verifierFetched(verifier, locked: locked, iterationCounts: counts, shared: failures, on: connection, now: now, entropy: &$1)
            }
        case .register(let connection, let knownDevices, let elsewhere):
            registered(on: connection, .success((knownDevices, elsewhere)), now: now, into: &output)
        case .lookup(let user, let routes):
            lookedUp(user, .success(routes), now: now, into: &output)
        case .publish(let relay, let delivery, let listeners):
            published(to: relay, delivery, .success(listeners), into: &output)
        case .checkSession(let user, let session, let current):
            sessionChecked(user: user, session: session, current: current, now: now, into: &output)
        case .storeInInbox(let user, let message, let entry, let stored):
            inboxStored(user: user, message: message, .success((entry, stored)), now: now, into: &output)
        case .loadInbox(let user, let device, let entries, let wallNow, let earlier):
            inboxLoaded(Recipient(user: user, device: device), .success((entries, wallNow, earlier)), now: now, into: &output)
        case .room(let request, let answer):
            roomAnswered(request, .success(answer), into: &output)
        case .postToRoom(let room, let message, let posted):
            roomPosted(room: room, message: message, .success(posted), into: &output)
        case .countRoomDelivery(let copy, let delivered):
            roomDeliveryCounted(copy: copy, delivered: delivered, now: now, into: &output)
        case .recordPresence(let user, let online, let lastSeen, let roomPeers, let hidden):
            presenceRecorded(user: user, online: online, lastSeen: lastSeen, roomPeers: roomPeers, hidden: hidden, now: now, into: &output)
        case .who(let request, let entries):
            whoAnswered(request, .success(entries), into: &output)
        case .refresh(let relayRecordWasMissing):
            refreshed(relayRecordWasMissing: relayRecordWasMissing)
        case .publishKeys(let request, let left, let change, let watchers):
            keysPublished(request, .success(left), into: &output)
            // A new device list (docs/E2E.md §3.4) is news too: the watchers fetch again.
            if change != .unchanged || !request.deviceList.isEmpty { tellOfNewKeys(request, change, watchers: watchers, now: now, into: &output) }
        case .fetchKeys(let request, let devices, let known, let deviceList, let log):
            keysFetched(request, .success((devices, known)), deviceList: deviceList, log: log, into: &output)
            askToPublish(after: request, devices, known: known, now: now, into: &output)
        case .limitReached(let request, let reason):
            limitReached(request, reason, now: now, into: &output)
        case .holdFileChunk(let chunk, let result):
            heldChunkStored(chunk, result, now: now, into: &output)
        case .fetchHeldChunks(let fetch, let chunks):
            heldChunksFetched(fetch, chunks, into: &output)
        case .grantHeldFile(let grant, let result):
            heldFileGranted(grant, result, now: now, into: &output)
        case .releaseHeldFile(let owner, let fileId, let recipient, let device, let firstTime):
            if firstTime { heldFileReceived(owner: owner, fileId: fileId, by: recipient, device: device, into: &output) }
        case .written:
            break
        }
    }

    /// The store could not carry out `request` (made by this core as `.store(request)`).
    public mutating func storeFailed(_ request: StoreRequest, _ failure: StoreFailure, now: NIODeadline, into output: inout [RelayAction]) {
        defer { requestSettled(on: request.controlConnection, into: &output) }
        if case .fetchVerifier(_, let connection, _) = request, tokenRefreshFailed(on: connection, failure, into: &output) { return }
        switch request {
        case .fetchVerifier(_, let connection, _):
            verifierFetched(on: connection, into: &output) { login, _ in login.verifierFetchFailed(on: connection, failure) }
        case .register(_, let connection):
            registered(on: connection, .failure(failure), now: now, into: &output)
        case .lookup(let user):
            lookedUp(user, .failure(failure), now: now, into: &output)
        case .publish(let relay, let delivery):
            published(to: relay, delivery, .failure(failure), into: &output)
        case .storeInInbox(let user, let message):
            inboxStored(user: user, message: message, .failure(failure), now: now, into: &output)
        case .loadInbox(let user, let device):
            inboxLoaded(Recipient(user: user, device: device), .failure(failure), now: now, into: &output)
        case .room(let request):
            roomAnswered(request, .failure(failure), into: &output)
        case .postToRoom(let room, let message):
            roomPosted(room: room, message: message, .failure(failure), into: &output)
        case .who(let request):
            whoAnswered(request, .failure(failure), into: &output)
        case .publishKeys(let request):
            keysPublished(request, .failure(failure), into: &output)
        case .fetchKeys(let request):
            keysFetched(request, .failure(failure), into: &output)
        case .checkSession, .countRoomDelivery, .recordPresence:
            break // nothing to tell: the session stays, the progress or presence frame is not sent
        case .holdFileChunk, .fetchHeldChunks, .releaseHeldFile, .grantHeldFile:
            break // not acknowledged, not answered: the sender's or receiver's timeout asks again
        case .unregister, .moveRoute, .refresh, .withdraw, .announceMove, .removeFromInbox, .recordLogin, .noteContact:
            break // writes whose failure leaves nothing to tell anyone: expiry cleans up after them
        }
    }

    /// What the login said to a fetched verifier (or a failed fetch) goes out.
    private mutating func verifierFetched(
        on connection: ConnectionID, into output: inout [RelayAction], _ step: (inout RelayLogin, inout Entropy) -> RelayLogin.Step
    ) {
        guard case .actions(let actions) = step(&login, &entropy) else { return } // a verifier only ever leads to a challenge
        output += actions
    }
}
