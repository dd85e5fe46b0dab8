import NIOCore

/// Delivers what users' devices have not received from their logs (docs/PROTOCOL.md §6.6),
/// without I/O: the relay acts as the retransmitting sender of the stored messages, with one
/// `ReliableSender` per (receiver, original sender) that keeps the messages' original id,
/// stream, seq and floor, so the receiver's `ReceiverCore` orders them and drops duplicates as
/// if their sender had retransmitted them.
///
/// `RelayCore` owns one and turns its outputs into actions.
public struct InboxCore: Sendable {
    private struct DrainKey: Hashable, Sendable {
        let receiver: Recipient
        let sender: String
    }

    private struct Drain: Sendable {
        var sender: ReliableSender
        var entries: [UInt64: InboxEntry] = [:]
        /// Entries in flight that the device holds behind a gap (HELD receipt): arrived, not yet
        /// receipted. Always a subset of the sender's pending messages.
        var heldByReceiver: Set<UInt64> = []

        /// Whether every entry sent has reached the device (held there). Entries still waiting
        /// for room in the window do not count: a direct datagram that overtakes them is held
        /// by the device's receiver, its `floor` being at or below their seq (§6.5, §6.6).
        var allArrived: Bool { heldByReceiver.count == sender.inFlightCount }
    }

    /// What to do after a call.
    public struct Output: Sendable {
        /// Content messages to send to `user` over UDP.
        public var datagrams: [(user: Recipient, message: SIMPMessage)] = []
        /// Stored receipts and read markers to hand to `user` over its control connection (then remove).
        public var receipts: [(user: Recipient, entry: InboxEntry)] = []
        /// Entries `receiver` receipted: remove them and tell their senders.
        public var delivered: [(receiver: Recipient, entry: InboxEntry)] = []
        /// Entries older than the TTL: remove them and tell their senders.
        public var expired: [(receiver: Recipient, entry: InboxEntry)] = []
        /// Direct datagrams held back while stored messages of the same sender were delivered,
        /// now to be forwarded to `user`.
        public var released: [(user: Recipient, bytes: ByteBuffer)] = []
        public init() {}
    }

    public let retransmit: RetransmitPolicy
    /// How long an entry may wait, in milliseconds.
    public let ttlMillis: Int64
    private var drains: [DrainKey: Drain] = [:]
    /// Each connected receiving device's latest RTT estimate, from its drains' receipts: a new
    /// drain to it starts from there rather than from the 1 s initial RTO, so a datagram lost
    /// at the start of a drain is not resent a second later (messages to a user with several
    /// devices all go through drains, one episode after another).
    private var pathEstimates: [Recipient: RTTEstimator] = [:]
    /// Direct datagrams waiting for a drain of the same (receiver, sender) to finish, by id.
    private var held: [DrainKey: [(id: UInt64, bytes: ByteBuffer)]] = [:]
    /// Direct datagrams held per (receiver, sender) at most; later ones are dropped (their
    /// senders retransmit).
    public static let maxHeld = 256

    /// Receiving devices that connected and whose backlog has not been read yet, with the
    /// entries stored for them meanwhile: those go out after the backlog, never before it.
    private var awaitingBacklog: [Recipient: [InboxEntry]] = [:]

    /// Each connected receiving device's highest seq per "sender/stream" among the entries stored
    /// before the device became known (from its backlog read): those never reach it, so the
    /// floor of what it is sent of that stream is raised past them (docs/PROTOCOL.md §6.6).
    private var notForDevice: [Recipient: [String: UInt64]] = [:]

    /// Whether no inbox is being delivered (the relay's fast path checks this first).
    public var isIdle: Bool { drains.isEmpty }

    /// The receiving device `device` connected: until its backlog has been read (`loaded`), new
    /// entries for it wait, so nothing stored overtakes what was stored for it while it was
    /// away. (Direct datagrams are not held: a sender's floor stays at or below its stored
    /// messages until they are delivered, so the device's receiver orders them.)
    public mutating func deviceConnected(_ device: Recipient) {
        userLeft(device)
        awaitingBacklog[device] = []
    }

    /// A direct datagram from `sender` to `receiver` while stored messages from `sender` are
    /// still being delivered to `receiver`: it waits until they are receipted, so it cannot
    /// overtake them. Returns false (forward it now) when nothing is being delivered.
    public mutating func holdIfDelivering(_ bytes: ByteBuffer, messageId: UInt64, to receiver: Recipient, from sender: String) -> Bool {
        let key = DrainKey(receiver: receiver, sender: sender)
        guard let drain = drains[key], !drain.allArrived else { return false }
        let queue = held[key, default: []]
        if queue.count < Self.maxHeld, !queue.contains(where: { $0.id == messageId }) { held[key, default: []].append((messageId, bytes)) }
        return true
    }

    /// Whether stored messages from `sender` are being delivered to `receiver`.
    public func isDelivering(to receiver: Recipient, from sender: String) -> Bool {
        drains[DrainKey(receiver: receiver, sender: sender)] != nil
    }

    /// Whether stored message `messageId` of `sender` is being delivered to `receiver` (not yet
    /// receipted by it).
    public func isDelivering(_ messageId: UInt64, to receiver: Recipient, from sender: String) -> Bool {
        drains[DrainKey(receiver: receiver, sender: sender)]?.entries[messageId] != nil
    }

    /// The drain `key` finished (or gave up): what was held for it goes out now.
    private mutating func finished(_ key: DrainKey, into output: inout Output) {
        drains[key] = nil
        output.released += (held.removeValue(forKey: key) ?? []).map { (key.receiver, $0.bytes) }
    }

    public init(retransmit: RetransmitPolicy = RetransmitPolicy(), ttlMillis: Int64) {
        self.retransmit = retransmit
        self.ttlMillis = ttlMillis
    }

    /// Stored messages in flight to their receivers.
    public var inFlightCount: Int { drains.values.reduce(0) { $0 + $1.entries.count } }

    /// When `poll` next has work, if ever.
    public var nextDeadline: NIODeadline? { drains.values.compactMap(\.sender.nextDeadline).min() }

    /// What the device `user` has not receipted was read from its log (oldest first) after it
    /// connected: what is within the TTL goes out in order, the rest is reported expired. Any
    /// earlier delivery to `user` is replaced. `earlier`: the entries in the log stored before
    /// the device became known, which it never gets.
    public mutating func loaded(user: Recipient, entries: [InboxEntry], earlier: [InboxEntry] = [], wallNow: Int64, now: NIODeadline) -> Output {
        for key in drains.keys where key.receiver == user { drains[key] = nil }
        let earlierSeqs = Self.highestSeqs(earlier)
        notForDevice[user] = earlierSeqs.isEmpty ? nil : earlierSeqs // no entry for a device that missed nothing
        var output = Output()
        var entries = entries
        if let storedMeanwhile = awaitingBacklog.removeValue(forKey: user), !storedMeanwhile.isEmpty {
            let read = Set(entries.map(\.dedupeKey))
            entries += storedMeanwhile.filter { !read.contains($0.dedupeKey) } // stored after the read began
        }
        entries = Self.inSeqOrder(entries)
        let raised = Self.raisedFloors(entries)
        for entry in entries {
            if entry.storedAt + ttlMillis < wallNow {
                output.expired.append((user, entry))
            } else if entry.isHandedOver {
                output.receipts.append((user, entry))
            } else if entry.message.kind.isContent {
                output.datagrams += submit(entry, to: user, floorAtLeast: raised[Self.streamKey(entry.message)], now: now)
            }
        }
        // Direct datagrams held for a sender with nothing stored go out now.
        for key in held.keys where key.receiver == user && drains[key] == nil { finished(key, into: &output) }
        return output
    }

    /// `entries` with each conversation's messages in `seq` order: a room's copies in the room's
    /// order, and each (sender, stream)'s messages in the sender's. The log holds them in the order
    /// they were stored, which differs when a message was stored after later ones (its first
    /// datagram was lost, or relays stored a room's copies out of order); delivered in log order,
    /// a receiver would hold the later ones behind the gap, and a drain's window could stall on
    /// them. Entries without a seq keep their places, and so does every other entry.
    static func inSeqOrder(_ entries: [InboxEntry]) -> [InboxEntry] {
        func conversation(_ message: SIMPMessage) -> String? {
            guard message.kind.isContent, message.seq > 0 else { return nil }
            return message.fromUser.hasPrefix("#") ? message.fromUser : streamKey(message)
        }
        var sorted: [String: [InboxEntry]] = [:]
        for entry in entries { if let key = conversation(entry.message) { sorted[key, default: []].append(entry) } }
        for key in sorted.keys { sorted[key]!.sort { $0.message.seq < $1.message.seq } }
        var next: [String: Int] = [:]
        return entries.map { entry in
            guard let key = conversation(entry.message), let conversationEntries = sorted[key] else { return entry }
            defer { next[key, default: 0] += 1 }
            return conversationEntries[next[key, default: 0]]
        }
    }

    /// An entry was stored for `user`, who is connected: a content message goes out now (with
    /// the relay as its retransmitting sender), a stored receipt or read marker is handed over.
    public mutating func enqueue(_ entry: InboxEntry, for user: Recipient, now: NIODeadline) -> Output {
        var output = Output()
        if let waiting = awaitingBacklog[user] { // after the backlog, which is being read
            if !waiting.contains(where: { $0.dedupeKey == entry.dedupeKey }) { awaitingBacklog[user]!.append(entry) }
            return output
        }
        if entry.isHandedOver {
            output.receipts.append((user, entry))
        } else if entry.message.kind.isContent {
            output.datagrams = submit(entry, to: user, now: now)
        }
        return output
    }

    /// "sender/stream" of a message.
    private static func streamKey(_ message: SIMPMessage) -> String { "\(message.fromUser)/\(message.stream)" }

    /// What the floor of each (sender, stream)'s entries is raised to (docs/PROTOCOL.md §6.6),
    /// so the receiver does not wait for messages it will never get: the lowest seq of the
    /// stream among the content entries a device has not receipted, but no higher than the
    /// highest `custodyFloor` they carry. A seq below the lowest that went through the log was
    /// delivered to the device already or discarded (cap, TTL); one at or above the custody
    /// floor was neither resolved nor stored when its sender sent them: the sender may still be
    /// sending it (its first datagram lost before a relay restart, say), and skipping it would
    /// deliver it out of order. Entries without a custody floor (older senders) are raised to
    /// the lowest seq.
    static func raisedFloors(_ entries: [InboxEntry]) -> [String: UInt64] {
        var custody: [String: UInt64] = [:]
        for entry in entries where entry.message.kind.isContent && entry.message.seq > 0 && entry.message.custodyFloor > 0 {
            let key = streamKey(entry.message)
            custody[key] = max(custody[key] ?? 0, entry.message.custodyFloor)
        }
        return lowestSeqs(entries).merging(custody, uniquingKeysWith: min)
    }

    /// The lowest seq of each (sender, stream) among the content entries a device has not
    /// receipted. Earlier seqs of that stream are not among them: delivered to the device
    /// already, or discarded (cap, TTL). The floor of the stream's entries is raised to it, so the receiver
    /// does not wait for messages it will never get (docs/PROTOCOL.md §6.6).
    static func lowestSeqs(_ entries: [InboxEntry]) -> [String: UInt64] {
        seqs(of: entries, min)
    }

    /// The highest seq of each (sender, stream) among the content entries.
    static func highestSeqs(_ entries: [InboxEntry]) -> [String: UInt64] {
        seqs(of: entries, max)
    }

    private static func seqs(of entries: [InboxEntry], _ pick: (UInt64, UInt64) -> UInt64) -> [String: UInt64] {
        var picked: [String: UInt64] = [:]
        for entry in entries where entry.message.kind.isContent && entry.message.seq > 0 {
            let key = streamKey(entry.message)
            picked[key] = picked[key].map { pick($0, entry.message.seq) } ?? entry.message.seq
        }
        return picked
    }

    /// The floor `message` goes to `user` with: raised to `lowest` (the lowest seq of its stream
    /// in the device's backlog, for a backlog entry) and past the seqs of its stream stored
    /// before the device became known, but never past a seq of the stream still in flight to the
    /// device nor past its own seq; a floor of 0 (unordered) stays.
    private func deliveredFloor(of message: SIMPMessage, to user: Recipient, in drain: Drain, backlogLowest lowest: UInt64?) -> UInt64 {
        guard message.floor > 0 else { return 0 }
        var target = lowest ?? 0
        let key = Self.streamKey(message)
        if let before = notForDevice[user]?[key] {
            let inFlight = drain.entries.values.lazy.filter { Self.streamKey($0.message) == key }.map(\.message.seq).min() ?? .max
            // Never past the lowest seq its sender had not yet resolved or stored when it sent
            // this message: that one may still be on its way (custodyFloor, §6.6).
            let unresolved = message.custodyFloor > 0 ? message.custodyFloor : .max
            target = max(target, min(before + 1, inFlight, unresolved))
        }
        return message.floor < target ? min(target, message.seq) : message.floor
    }

    private mutating func submit(
        _ entry: InboxEntry, to user: Recipient, floorAtLeast lowest: UInt64? = nil, now: NIODeadline
    ) -> [(user: Recipient, message: SIMPMessage)] {
        let key = DrainKey(receiver: user, sender: entry.message.fromUser)
        guard drains[key]?.entries[entry.message.messageId] == nil else { return [] } // stored twice: sent once
        // Taken out while it changes, so the dictionary's copy does not make the change copy it.
        var drain =
            drains.removeValue(forKey: key)
            ?? Drain(sender: ReliableSender(firstMessageId: 1, policy: retransmit, keepsSenderSequence: true, estimator: pathEstimates[user]))
        var message = entry.message // the entry itself stays as stored (its text removes it)
        message.floor = deliveredFloor(of: message, to: user, in: drain, backlogLowest: lowest)
        drain.entries[entry.message.messageId] = entry
        let (_, sent) = drain.sender.submit(message, now: now)
        drains[key] = drain
        return sent.transmit.map { (user, $0) }
    }

    /// A RECEIPT from `user`: if it answers a stored message, that entry is delivered (nil
    /// means the receipt is not about the inbox and is routed as usual). A HELD receipt
    /// (docs/PROTOCOL.md §6.6 rule 4) delivers nothing: the entry stays, sent again only
    /// slowly, until the final receipt; once every entry in flight has arrived, direct
    /// datagrams held for the drain go out (they can no longer overtake those entries).
    public mutating func receipt(_ receipt: SIMPMessage, from user: Recipient, now: NIODeadline) -> Output? {
        let key = DrainKey(receiver: user, sender: receipt.toUser)
        guard drains[key]?.entries[receipt.messageId] != nil, var drain = drains.removeValue(forKey: key) else { return nil }
        var output = Output()
        let sent = drain.sender.handleReceipt(receipt, now: now)
        if drain.sender.estimator.smoothedRTT != nil { pathEstimates[user] = drain.sender.estimator }
        output.datagrams = sent.transmit.map { (user, $0) }
        if !receipt.held {
            output.delivered.append((user, drain.entries.removeValue(forKey: receipt.messageId)!))
            drain.heldByReceiver.remove(receipt.messageId)
        } else if drain.sender.isPending(receipt.messageId) {
            drain.heldByReceiver.insert(receipt.messageId)
        }
        guard !drain.entries.isEmpty else {
            finished(key, into: &output)
            return output
        }
        if drain.allArrived { output.released += (held.removeValue(forKey: key) ?? []).map { (key.receiver, $0.bytes) } }
        drains[key] = drain
        return output
    }

    /// Retransmits what timed out. A message that runs out of attempts stays in the log (the
    /// device's cursor does not pass it) for the device's next connection.
    public mutating func poll(now: NIODeadline) -> Output {
        var output = Output()
        for key in Array(drains.keys) {
            guard let deadline = drains[key]?.sender.nextDeadline, deadline <= now, var drain = drains.removeValue(forKey: key) else { continue }
            let sent = drain.sender.poll(now: now)
            output.datagrams += sent.transmit.map { (key.receiver, $0) }
            for case .failed(let id, _, _) in sent.events {
                drain.entries[id] = nil
                drain.heldByReceiver.remove(id)
            }
            if drain.entries.isEmpty { finished(key, into: &output) } else { drains[key] = drain }
        }
        return output
    }

    /// A round trip to the device `user` took `rtt` (CONNECTED out, its HELLO in): its first
    /// drain starts from that rather than from the 1 s initial RTO, so a lost first datagram of
    /// a backlog is resent within a few round trips, not after a second.
    public mutating func roundTripMeasured(to user: Recipient, _ rtt: TimeAmount) {
        guard pathEstimates[user] == nil else { return }
        var estimator = retransmit.makeEstimator()
        estimator.addSample(rtt)
        pathEstimates[user] = estimator
    }

    /// `user` (a receiving device) left: deliveries to it stop (its entries stay stored).
    public mutating func userLeft(_ user: Recipient) {
        awaitingBacklog[user] = nil
        pathEstimates[user] = nil
        notForDevice[user] = nil
        for key in drains.keys where key.receiver == user { drains[key] = nil }
        for key in held.keys where key.receiver == user { held[key] = nil } // their senders retransmit
    }
}
