import NIOCore
import SIMPCore

// Messages and addresses as the relay-core tests write them (test-local: a library that
// exported these names, or the string-literal conformance, would put them in every importer).

/// A user's default device, written as its user's name (as relay tests did before devices).
extension Recipient: ExpressibleByStringLiteral {
    public init(stringLiteral user: String) { self.init(user: user) }
}

/// A text message, as tests send them.
func textMessage(_ id: UInt64, from: String, to: String) -> SIMPMessage {
    SIMPMessage(kind: .text, messageId: id, fromUser: from, toUser: to, content: "msg \(id)")
}

/// An address.
func address(_ ip: String, _ port: Int) -> SocketAddress { try! SocketAddress(ipAddress: ip, port: port) }

/// A receipt of message `id` from `from` (the receiver) to `to` (the sender) with `status`, as
/// the relay writes it for stored messages (not an RTT sample: attempt 0).
func statusReceipt(_ id: UInt64, from: String, to: String, _ status: SIMPMessage.DeliveryStatus) -> SIMPMessage {
    var receipt = SIMPMessage(kind: .receipt, messageId: id, fromUser: from, toUser: to)
    receipt.status = status
    return receipt
}

/// A STORED receipt for a receiver with several devices, at least one of them online.
func onlineStoredReceipt(_ id: UInt64, from: String, to: String) -> SIMPMessage {
    var receipt = statusReceipt(id, from: from, to: to, .stored)
    receipt.receiverOnline = true
    return receipt
}
