import NIOCore

/// Receipts on the control channel (docs/PROTOCOL.md §6.1): single or batch, vouched for by the
/// relay and routed to the original sender's sessions, or to the inbox delivering the message.
extension RelayCore {
    /// A control frame that may be a plain RECEIPT, routed from its bytes without decoding
    /// and re-encoding it (docs/PROTOCOL.md §6.1): when its routing fields read directly
    /// (`DatagramHeader.parse`), it already names the connection's user as `fromUser` (so there
    /// is nothing to overwrite), its `toUser` has sessions on this relay only, and no stored
    /// messages are being delivered, it is forwarded as it came. Returns false when it is not
    /// handled here: the caller decodes it and calls `controlReceived`, which decides the same
    /// way for everything this path takes.
    public mutating func receiptFrameReceived(_ payload: ByteBuffer, on connection: ConnectionID, now: NIODeadline, into output: inout [RelayAction]) -> Bool {
        guard inbox.isIdle, let header = DatagramHeader.parse(payload), header.kind == .receipt,
              header.version == SIMPMessage.currentVersion, !header.toUser.isEmpty,
              case .connected(let user)? = connections.phase(of: connection), header.fromUser == user,
              !sessions.isElsewhere(header.toUser) else { return false }
        let local = sessions.connections(of: header.toUser)
        guard !local.isEmpty else { return false }
        connections.heard(connection, now: now)
        timers.receiptRouted(now: now)
        for sender in local { output.append(.forward(sender, payload)) }
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
        if !inbox.isIdle, let recipient = sessions.session(on: connection).flatMap({ sessions.recipient(ofSession: $0) }) {
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
        guard !receipt.receiptIds.isEmpty else {
            guard let stored = inbox.receipt(receipt, from: recipient, now: now) else { return receipt }
            inboxActions(stored, into: &output)
            return nil
        }
        var unclaimed: [UInt64] = []
        var sample: SIMPMessage?
        for id in [receipt.messageId] + receipt.receiptIds {
            var single = receipt
            single.receiptIds = []
            if id != receipt.messageId { (single.messageId, single.attempt, single.holdMicros) = (id, 0, 0) }
            if let stored = inbox.receipt(single, from: recipient, now: now) {
                inboxActions(stored, into: &output)
            } else if id == receipt.messageId {
                sample = single
            } else {
                unclaimed.append(id)
            }
        }
        guard var rest = sample ?? unclaimed.first.map({ id in
            var first = receipt
            (first.messageId, first.attempt, first.holdMicros) = (id, 0, 0)
            return first
        }) else { return nil }
        rest.receiptIds = unclaimed.filter { $0 != rest.messageId }
        return rest
    }
}
