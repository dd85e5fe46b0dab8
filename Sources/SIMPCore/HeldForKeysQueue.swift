import NIOCore

/// Messages that could not be sealed yet (docs/PROTOCOL.md §4.8, "Sending"), without I/O: the
/// relay could not be asked for the receiver's devices (unreachable, its store failing, no
/// answer in time) and this device never learned them, or the receiver has published no keys
/// yet (it never logged in). Each keeps its id and waits (the shell keeps it in the outbox), and
/// is sealed and sent, once, in the order typed, when the keys come: at the next login, at the
/// next try (`KeyWait`), or when the relay tells of the receiver's first bundle. Later messages
/// to the same receiver wait behind it, so none overtakes another; messages to other receivers
/// do not wait for it. A message held for the relay is given up at its give-up time; one
/// waiting for a first login never is.
///
/// The shell seals (`startSealing` names the message, `sealFinished` takes how it went), keeps
/// one timer per receiver at the retry this queue plans, and carries out the `Decision`.
public struct HeldForKeysQueue: Sendable, Equatable {
    /// A held message and when it was held.
    public struct Entry: Sendable, Equatable {
        public let message: SIMPMessage
        public let heldAt: NIODeadline
    }

    /// Why a message cannot be sealed yet.
    public enum Waiting: Sendable, Equatable {
        /// The relay could not be asked for the receiver's devices: ask again at `retry` (nil:
        /// at the next login).
        case forRelay(retry: NIODeadline?)
        /// The receiver has published no keys yet: ask again at `recheck`.
        case forFirstKeys(recheck: NIODeadline)
    }

    /// How sealing a held message went.
    public enum SealResult: Sendable, Equatable {
        case sealed
        case waiting(Waiting)
        /// It can never be sealed (the relay refused the fetch, a verified contact's key
        /// changed, …): the shell says why.
        case cannotSeal
    }

    /// When the receiver's held messages are tried again.
    public struct Retry: Sendable, Equatable {
        public let peer: String
        /// nil: at the next login.
        public let at: NIODeadline?
        /// Tell the user, once, that messages wait for `peer`'s first login.
        public let tellWaitingForFirstLogin: Bool

        public init(peer: String, at: NIODeadline?, tellWaitingForFirstLogin: Bool) {
            self.peer = peer
            self.at = at
            self.tellWaitingForFirstLogin = tellWaitingForFirstLogin
        }
    }

    /// What the shell does after a held message's seal.
    public enum Decision: Sendable, Equatable {
        /// Submit the sealed message: it left the queue (it stays in the outbox until its outcome).
        case send(messageId: UInt64)
        /// It waited for the relay past its give-up time: fail it as expired after `after`.
        case giveUp(messageId: UInt64, after: TimeAmount)
        /// It can never be sealed: fail it with the seal's reason.
        case fail(messageId: UInt64)
        /// It waits: try again as `retry` says (the next messages to the receiver wait behind it).
        case wait(Retry)
        /// It was no longer held.
        case gone
    }

    /// How long a message held for the relay waits before it is given up.
    public let giveUpAfter: TimeAmount
    /// The held messages, oldest first.
    public private(set) var entries: [Entry] = []
    /// Receivers whose oldest held message is being sealed now.
    public private(set) var sealing: Set<String> = []
    /// When each receiver's held messages are tried again.
    public private(set) var retries: [String: NIODeadline] = [:]
    /// Receivers whose user was told that messages wait for their first login.
    var toldWaiting: Set<String> = []

    public init(giveUpAfter: TimeAmount) {
        self.giveUpAfter = giveUpAfter
    }

    /// Whether a message to `peer` is waiting (a new message to `peer` then waits behind it).
    public func holds(messagesTo peer: String) -> Bool { entries.contains { $0.message.toUser == peer } }

    /// The receivers with held messages, in the order of their oldest.
    public var peers: [String] {
        var peers: [String] = []
        for entry in entries where !peers.contains(entry.message.toUser) { peers.append(entry.message.toUser) }
        return peers
    }

    /// Holds `message` (with its id) until it can be sealed.
    public mutating func hold(_ message: SIMPMessage, now: NIODeadline) {
        entries.append(Entry(message: message, heldAt: now))
    }

    /// The oldest held message to `peer` could not be sealed yet (`waiting`): when it is tried
    /// again; the user is told once that messages wait for a first login.
    public mutating func keepWaiting(for peer: String, _ waiting: Waiting) -> Retry {
        let next: NIODeadline?
        var tell = false
        switch waiting {
        case .forFirstKeys(let recheck):
            next = recheck
            tell = toldWaiting.insert(peer).inserted
        case .forRelay(let retry):
            next = retry
        }
        retries[peer] = next
        return Retry(peer: peer, at: next, tellWaitingForFirstLogin: tell)
    }

    /// The oldest held message to `peer`, to seal now (connected: the relay can be asked); nil
    /// when there is none, one is being sealed, or the client is not connected. Its retry is
    /// no longer planned.
    public mutating func startSealing(to peer: String, connected: Bool) -> Entry? {
        guard connected, !sealing.contains(peer), let entry = entries.first(where: { $0.message.toUser == peer }) else { return nil }
        retries[peer] = nil
        sealing.insert(peer)
        return entry
    }

    /// Sealing `entry` (from `startSealing`) went as `result` at `now`.
    public mutating func sealFinished(_ entry: Entry, _ result: SealResult, now: NIODeadline) -> Decision {
        let peer = entry.message.toUser, id = entry.message.messageId
        sealing.remove(peer)
        switch result {
        case .waiting(.forRelay) where KeyWait().givesUp(heldAt: entry.heldAt, now: now, giveUpAfter: giveUpAfter):
            return release(id) ? .giveUp(messageId: id, after: giveUpAfter) : .gone
        case .waiting(let waiting):
            return .wait(keepWaiting(for: peer, waiting))
        case .cannotSeal:
            return release(id) ? .fail(messageId: id) : .gone
        case .sealed:
            return release(id) ? .send(messageId: id) : .gone
        }
    }

    /// The connection is lost for good: no retry is planned any more, and the user will be
    /// told again that messages wait. The messages stay held (the user may connect again);
    /// returns their ids (their callers learn the connection was lost).
    public mutating func connectionLostForGood() -> [UInt64] {
        retries.removeAll()
        toldWaiting.removeAll()
        return entries.map(\.message.messageId)
    }

    /// Takes held message `id` out of the queue; false if it was not held.
    private mutating func release(_ id: UInt64) -> Bool {
        guard let index = entries.firstIndex(where: { $0.message.messageId == id }) else { return false }
        let entry = entries.remove(at: index)
        if !holds(messagesTo: entry.message.toUser) { toldWaiting.remove(entry.message.toUser) }
        return true
    }
}
