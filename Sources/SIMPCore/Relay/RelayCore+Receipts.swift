import NIOCore

/// Receipts on the control channel (docs/PROTOCOL.md §6.1): single or batch, vouched for by the
/// relay and routed to the original sender's sessions, or to the inbox delivering the message.
extension RelayCore {
    /// A control frame that may be a plain RECEIPT, routed from its bytes without decoding
    /// and re-encoding it (docs/PROTOCOL.md §6.1): when its routing fields read directly
    /// (`DatagramHeader.parse`), it already names the connection's user as `fromUser` (so there
    /// is nothing to overwrite), its `toUser` has sessions on this relay only (each of which
    /// reads batches, if it is a batch), and no stored messages are being delivered, it is
    /// forwarded as it came. Returns false when it is not
    /// handled here: the caller decodes it and calls `controlReceived`, which decides the same
    /// way for everything this path takes.
    public mutating func receiptFrameReceived(_ payload: ByteBuffer, on connection: ConnectionID, now: NIODeadline, into output: inout [RelayAction])
        -> Bool
    {
        guard inbox.isIdle, let header = DatagramHeader.parse(payload), header.kind == .receipt,
            header.version == SIMPMessage.currentVersion, !header.toUser.isEmpty,
            case .connected(let user, _)? = connections.phase(of: connection), header.fromUser == user
        else { return false }
        // The forwards are appended as the sender's connections are found; none (no session
        // here, sessions elsewhere too, a batch some client here does not read): not handled
        // here, and nothing was appended.
        let forwards = sessions.forEachReceiptConnection(of: header.toUser, batch: header.isBatch) { output.append(.forward($0, payload)) }
        guard forwards > 0 else { return false }
        connections.heard(connection, now: now)
        timers.receiptRouted(now: now)
        return true
    }

    /// A RECEIPT on `user`'s control channel (`connection`): to the inbox's delivery, or to the
    /// original sender's sessions. A batch goes on as one frame; only while a stored-message
    /// delivery to this receiver is under way is it split, so that the inbox gets the receipts
    /// of its messages one by one and the sender the rest as one batch.
    mutating func routeReceipt(
        _ receipt: SIMPMessage, from user: String, on connection: ConnectionID, now: NIODeadline, into output: inout [RelayAction]
    ) {
        var receipt = receipt
        receipt.fromUser = user // the relay vouches for who sent the receipt
        timers.receiptRouted(now: now)
        if !inbox.isIdle, let recipient = connections.session(on: connection).flatMap({ sessions.recipient(ofSession: $0) }) {
            guard let rest = claimStoredReceipts(receipt, from: recipient, now: now, into: &output) else { return }
            receipt = rest
        }
        guard !receipt.toUser.isEmpty else {
            return output.append(.reject(.receiptUnroutable, detail: "receipt from \(user) without toUser"))
        }
        routeControl(receipt, to: receipt.toUser, now: now, into: &output)
    }

    /// Hands the inbox the receipts of `receipt` (single or batch) for messages it is
    /// delivering to `recipient`; returns the receipt for the ids it did not claim (nil: none
    /// left). A batch's `messageId` keeps its `attempt`; the other ids go as receipts without one.
    private mutating func claimStoredReceipts(
        _ receipt: SIMPMessage, from recipient: Recipient, now: NIODeadline, into output: inout [RelayAction]
    ) -> SIMPMessage? {
        var unclaimed: [UInt64] = []
        for id in [receipt.messageId] + receipt.receiptIds {
            var single = receipt
            single.receiptIds = []
            if id != receipt.messageId { (single.messageId, single.attempt, single.holdMicros) = (id, 0, 0) }
            if let stored = inbox.receipt(single, from: recipient, now: now) {
                inboxActions(stored, into: &output)
            } else {
                unclaimed.append(id)
            }
        }
        return Self.receipt(receipt, narrowedTo: unclaimed)
    }

    /// `receipt` covering only `ids` (in the order `[messageId] + receiptIds`), nil if none: led
    /// by its own `messageId` with its `attempt` and `holdMicros` if that is among them, else by
    /// the lowest id left, without an attempt (docs/PROTOCOL.md §6.1 step 1a).
    static func receipt(_ receipt: SIMPMessage, narrowedTo ids: [UInt64]) -> SIMPMessage? {
        guard let lead = ids.contains(receipt.messageId) ? receipt.messageId : ids.first else { return nil }
        var narrowed = receipt
        if lead != receipt.messageId { (narrowed.messageId, narrowed.attempt, narrowed.holdMicros) = (lead, 0, 0) }
        narrowed.receiptIds = ids.filter { $0 != lead }
        return narrowed
    }

    /// A receipt's datagram copy from `user`'s receiving device `device` while the relay delivers
    /// it stored messages of the copy's `toUser`. The relay is the sender of those messages and
    /// acts on their receipts' control copies (docs/PROTOCOL.md §6.6 rule 4): their ids are taken
    /// out, so that neither a HELD receipt nor the relay's transmission counts reach the original
    /// sender; the ids left go on to the sender's sessions here.
    mutating func routeReceiptCopy(_ payload: ByteBuffer, from user: String, device: Recipient, into output: inout [RelayAction]) {
        guard let receipt = try? MessageCodec.decode(payload) else {
            return output.append(.reject(.malformed, detail: "receipt datagram from \(user) does not decode"))
        }
        let ids = [receipt.messageId] + receipt.receiptIds
        let left = ids.filter { !inbox.isDelivering($0, to: device, from: receipt.toUser) }
        guard left.count < ids.count else { return sessions.sealForEverySession(payload, to: receipt.toUser, into: &output) }
        guard let rest = Self.receipt(receipt, narrowedTo: left) else { return }
        sessions.sealForEverySession(MessageCodec.encode(rest), to: receipt.toUser, into: &output)
    }

    /// Whether the client of the session on `connection` reads batch receipts (said so in CONNECT).
    private func readsBatchReceipts(on connection: ConnectionID) -> Bool {
        connections.session(on: connection).map { sessions.readsBatchReceipts(ofSession: $0) } ?? false
    }

    /// `message` as the frames the client on `connection` reads: a batch receipt goes to a
    /// client whose CONNECT did not say it reads batches (`acceptsBatchReceipts`) as the single
    /// receipts it stands for, its `messageId` first (with its `attempt` and `holdMicros`), each
    /// other id without an attempt (docs/PROTOCOL.md §6.1); anything else goes as it is.
    func sendControl(_ message: SIMPMessage, to connection: ConnectionID, into output: inout [RelayAction]) {
        guard !message.receiptIds.isEmpty, !readsBatchReceipts(on: connection) else {
            return output.append(.send(connection, message))
        }
        var single = message
        single.receiptIds = []
        output.append(.send(connection, single))
        (single.attempt, single.holdMicros) = (0, 0)
        for id in message.receiptIds where id != message.messageId {
            single.messageId = id
            output.append(.send(connection, single))
        }
    }
}
