import NIOCore
import SIMPCore

/// The properties the fuzz targets check on every input.
enum FuzzChecks {
    /// `DatagramHeader.parse` gives up or agrees with the full decoder: when it reads a
    /// header, the decoder accepts the bytes and finds the same routing fields.
    static func headerAgrees(_ header: DatagramHeader?, with decoded: Result<SIMPMessage, Error>) throws {
        guard let header else { return }
        switch decoded {
        case .failure(let error):
            throw FuzzViolation("DatagramHeader.parse read \(header) but MessageCodec.decode failed: \(error)")
        case .success(let message):
            guard DatagramHeader(message) == header else {
                throw FuzzViolation("DatagramHeader.parse read \(header), MessageCodec.decode \(DatagramHeader(message))")
            }
        }
    }

    /// Whatever decodes re-encodes to a message that decodes to the same value.
    static func roundTrips(_ message: SIMPMessage) throws {
        let again: SIMPMessage
        do { again = try MessageCodec.decode(MessageCodec.encode(message)) } catch {
            throw FuzzViolation("re-encoded \(message) does not decode: \(error)")
        }
        guard sameValue(again, message) else {
            throw FuzzViolation("decode(encode(m)) != m:\n\(message)\n\(again)")
        }
    }

    /// A decoded batch receipt is what docs/PROTOCOL.md §6.1 allows (at most
    /// `SIMPMessage.maxReceiptIds` ids, strictly ascending, none 0), and a sender with messages
    /// in flight to its `fromUser` handles it (single or batch, valid ids or not) settling each
    /// in-flight message at most once. A HELD receipt (`held`) settles none, and its final
    /// receipt afterwards settles exactly what the same receipt would have settled at once.
    static func receiptIsHandled(_ message: SIMPMessage) throws {
        let ids = message.receiptIds
        guard ids.count <= SIMPMessage.maxReceiptIds, ids.first != 0, zip(ids, ids.dropFirst()).allSatisfy({ $0 < $1 }) else {
            throw FuzzViolation("decoded receiptIds outside the rules: \(ids.prefix(8))… (\(ids.count))")
        }
        guard message.kind == .receipt else { return }
        let (settledHeld, stillInFlight) = try settled(by: [message], of: message)
        guard message.held else { return }
        guard settledHeld == 0, stillInFlight == 4 else {
            throw FuzzViolation("a HELD receipt settled \(settledHeld) of 4 messages, \(stillInFlight) still in flight")
        }
        var final = message
        final.held = false
        let atOnce = try settled(by: [final], of: message).settled, later = try settled(by: [message, final], of: message).settled
        guard later == atOnce else {
            throw FuzzViolation("a final receipt after a HELD one settled \(later) messages, at once \(atOnce)")
        }
    }

    /// How many of four messages in flight to `message.fromUser` (ids around its `messageId`)
    /// `receipts` settle, and how many stay in flight; throws if any is settled twice or lost.
    private static func settled(by receipts: [SIMPMessage], of message: SIMPMessage) throws -> (settled: Int, inFlight: Int) {
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var sender = ReliableSender(firstMessageId: min(max(1, message.messageId &- 2), .max - 8)) // room for four more ids
        for _ in 0..<4 { _ = sender.submit(SIMPMessage(kind: .text, fromUser: "alice", toUser: message.fromUser), now: start) }
        var settled = 0
        for receipt in receipts { settled += sender.handleReceipt(receipt, now: start + .milliseconds(5)).events.count }
        guard settled <= 4, settled + sender.inFlightCount == 4 else {
            throw FuzzViolation("receipts settled \(settled) of 4 messages, \(sender.inFlightCount) still in flight")
        }
        return (settled, sender.inFlightCount)
    }

    /// Every message the relay would send on a control connection survives the wire.
    static func sendsAreEncodable(_ actions: [RelayCore.Action]) throws {
        for case .send(_, let message) in actions { try roundTrips(message) }
        for case .forward(_, let payload) in actions {
            // A receipt routed from its bytes: they decode to a RECEIPT with the routing fields read.
            guard let message = try? MessageCodec.decode(payload), message.kind == .receipt,
                DatagramHeader.parse(payload) == DatagramHeader(message)
            else {
                throw FuzzViolation("forwarded bytes are not the receipt the relay routed: \(Array(payload.readableBytesView))")
            }
            try roundTrips(message)
        }
    }

    /// Equality that treats NaN image scales as equal (protobuf-c copies the float's bits).
    private static func sameValue(_ a: SIMPMessage, _ b: SIMPMessage) -> Bool {
        var a = a, b = b
        if a.imageScale.isNaN, b.imageScale.isNaN { a.imageScale = 0; b.imageScale = 0 }
        return a == b
    }
}
