import CoreMetrics
import Logging
import SIMPCore

/// What an operator sees of the relay's store traffic: the logs and counts kept as requests go
/// out and answers come back (`ask` calls these). Sessions connecting and ending and messages
/// stored are not read from here: the core reports them (`report`).
extension RelayEngine {
    /// Counts and logs what an operator wants to see of a request.
    func noteRequest(_ request: StoreRequest) {
        switch request {
        case .moveRoute(let registration):
            logger.info(
                "user's datagram route moved",
                metadata: [
                    "user": "\(registration.user)", "udp": "\(AddressText.format(registration.route.address) ?? "?")",
                    "path": "\(registration.overControl ? "tcp" : "udp")",
                ])
        case .removeFromInbox:
            counts.inboxRemoved += 1
        default:
            break
        }
    }

    /// Counts and logs what an operator wants to see of an answer (failures are logged by `ask`).
    func noteAnswer(_ answer: StoreAnswer) {
        switch answer {
        case .loadInbox(let user, let device, let entries, _, _) where !entries.isEmpty:
            logger.info("delivering inbox", metadata: ["user": "\(user)", "device": "\(device)", "entries": "\(entries.count)"])
        case .publish(_, _, let heard) where heard > 0:
            counts.deliveriesPublished += 1
            metrics.deliveriesPublished.increment()
        default:
            break
        }
    }
}

extension StoreRequest {
    /// The request's kind, for logs.
    var name: String {
        switch self {
        case .fetchVerifier: "fetchVerifier"
        case .recordLogin: "recordLogin"
        case .register: "register"
        case .unregister: "unregister"
        case .moveRoute: "moveRoute"
        case .refresh: "refresh"
        case .withdraw: "withdraw"
        case .lookup: "lookup"
        case .publish: "publish"
        case .announceMove: "announceMove"
        case .checkSession: "checkSession"
        case .storeInInbox: "storeInInbox"
        case .loadInbox: "loadInbox"
        case .removeFromInbox: "removeFromInbox"
        case .room: "room"
        case .postToRoom: "postToRoom"
        case .countRoomDelivery: "countRoomDelivery"
        case .recordPresence: "recordPresence"
        case .noteContact: "noteContact"
        case .who: "who"
        case .publishKeys: "publishKeys"
        case .fetchKeys: "fetchKeys"
        case .holdFileChunk: "holdFileChunk"
        case .fetchHeldChunks: "fetchHeldChunks"
        case .releaseHeldFile: "releaseHeldFile"
        case .grantHeldFile: "grantHeldFile"
        }
    }
}
