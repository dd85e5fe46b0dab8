import Foundation
import SIMPCore

/// How `simp listen` shows a received message.
public enum MessageFormatting {
    /// The JSON line for `message`: `id`, `from`, `to`, `type`, `content`, `time`, plus
    /// `imageURL`/`imageScale` for images, and with an `origin`: `e2e` (whether it came end to
    /// end encrypted), `verified`, `device` (when known) and `keyChanged` (the sender's first
    /// message since its safety number changed, only when true).
    public static func jsonLine(_ message: SIMPMessage, origin: MessageOrigin? = nil) -> String {
        var object: [String: Any] = [
            "id": message.messageId, "from": message.fromUser, "to": message.toUser,
            "type": typeName(message.kind), "content": message.content, "time": message.time,
        ]
        if !message.author.isEmpty {
            object["room"] = message.room
            object["author"] = message.author
        }
        if message.kind == .image {
            object["imageURL"] = message.imageURL
            object["imageScale"] = Double(message.imageScale)
        }
        if let origin {
            object["e2e"] = origin.endToEnd
            object["verified"] = origin.verified
            if !origin.device.isEmpty { object["device"] = origin.device }
            if origin.keyChanged { object["keyChanged"] = true }
        }
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self)
    }

    /// A human-readable line: `[12:03:04] alice: hello`, or `[12:03:04] #room alice: hello`;
    /// with an `origin`, marked after the sender: `alice (phone, not verified): hello`.
    public static func textLine(_ message: SIMPMessage, origin: MessageOrigin? = nil) -> String {
        let date = Date(timeIntervalSince1970: Double(message.time) / 1000)
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss"
        let body: String
        switch message.kind {
        case .image: body = "[image] \(message.imageURL)" + (message.imageScale != 0 ? " (scale \(message.imageScale))" : "")
        case .audio: body = "[audio] \(message.content)"
        default: body = message.content
        }
        let sender = message.author.isEmpty ? message.fromUser : "\(message.fromUser) \(message.author)"
        let from = origin.map { sender + " " + $0.mark } ?? sender
        return "[\(formatter.string(from: date))] \(from): \(body)"
    }

    /// A short account of a send's outcome: `delivered in 1.2 ms`, `stored (receiver offline)`,
    /// `not delivered: …`, `connection lost; still in the outbox`.
    public static func outcomeText(_ result: SendResult) -> String {
        switch result {
        case .delivered(_, let latency, _): return String(format: "delivered in %.1f ms", Double(latency.nanoseconds) / 1_000_000)
        case .stored(_, receiverOnline: true):
            return "sent to the receiver's devices (one is online; the relay delivers it to each)"
        case .stored: return "stored (the relay holds it and delivers it to each of the receiver's devices)"
        case .failed(_, let failure): return "not delivered: \(failure)"
        case .connectionLost: return "connection lost before the receipt; still in the outbox"
        }
    }

    /// What to say at exit about `messages` (`SIMPClient.messagesKeptInMemoryOnly`): how many
    /// were not delivered and are lost, then one line per message (id, recipient, text).
    public static func lostAtExit(_ messages: [SIMPMessage]) -> [String] {
        guard !messages.isEmpty else { return [] }
        let many = messages.count > 1
        return [
            "\(messages.count) message\(many ? "s" : "") not delivered \(many ? "are" : "is") lost now "
                + "(the outbox could not be written, so nothing resends \(many ? "them" : "it")):"
        ]
            + messages.map { "  message \($0.messageId) to \($0.toUser): \($0.kind == .image ? $0.imageURL : $0.content)" }
    }

    /// What `/verify` and `simp keys --with` print for `user`'s safety numbers with `peer`'s
    /// devices (`SIMPClient.safetyNumbers(with:)`): per device a heading and the 60 digits
    /// (indented three spaces), then how to compare them; or that `peer` has no keys.
    public static func safetyNumberLines(user: String, peer: String, numbers: [(device: String, number: String)]) -> [String] {
        guard !numbers.isEmpty else { return ["\(peer) has published no end-to-end keys yet; messages to \(peer) wait for them"] }
        return numbers.flatMap { ["safety number with \(peer)'s device \($0.device):", "   " + $0.number] }
            + ["\(peer) sees the same with /verify \(user): compare in person or on a call"]
    }

    /// A notice about a connection state change, for standard error (nil for `.connecting`).
    public static func stateLine(_ state: ConnectionState) -> String? {
        switch state {
        case .connecting: return nil
        case .connected(let relayId): return "connected (relay \(relayId))"
        case .reconnecting(let attempt, let delay):
            return String(format: "relay unreachable; reconnecting in %.1f s (attempt %d)", Double(delay.nanoseconds) / 1e9, attempt)
        case .offline(let reason): return "offline: \(reason)"
        }
    }

    /// The wire name of a message type (`TEXT`, `IMAGE`, ...).
    public static func typeName(_ kind: SIMPMessage.Kind) -> String {
        switch kind {
        case .text: return "TEXT"
        case .image: return "IMAGE"
        case .audio: return "AUDIO"
        case .connect: return "CONNECT"
        case .receipt: return "RECEIPT"
        case .connected: return "CONNECTED"
        case .error: return "ERROR"
        case .ping: return "PING"
        case .pong: return "PONG"
        case .disconnect: return "DISCONNECT"
        case .auth: return "AUTH"
        case .challenge: return "CHALLENGE"
        case .hello: return "HELLO"
        case .roomJoin: return "ROOM_JOIN"
        case .roomLeave: return "ROOM_LEAVE"
        case .roomMembers: return "ROOM_MEMBERS"
        case .typing: return "TYPING"
        case .read: return "READ"
        case .who: return "WHO"
        case .presence: return "PRESENCE"
        case .datagram: return "DATAGRAM"
        case .keysPublish: return "KEYS_PUBLISH"
        case .keysFetch: return "KEYS_FETCH"
        case .tokenRefresh: return "TOKEN_REFRESH"
        case .fileChunk: return "FILE_CHUNK"
        case .fileAck: return "FILE_ACK"
        case .fileFetch: return "FILE_FETCH"
        case .fileUpload: return "FILE_UPLOAD"
        case .fileGrant: return "FILE_GRANT"
        }
    }

    /// Parses `HOST:PORT` for `--server`, with a message a user can act on.
    public static func parseServer(_ text: String) throws -> (host: String, port: Int) {
        guard let parsed = AddressText.parseHostPort(text) else {
            throw ServerAddressError(text: text)
        }
        return parsed
    }

    /// Parses `--server`: one `HOST:PORT` or several separated by commas (tried in turn).
    public static func parseServers(_ text: String) throws -> [RelayEndpoint] {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        return try parts.map { part in
            let (host, port) = try parseServer(part)
            return RelayEndpoint(host: host, port: port)
        }
    }
}

/// `--server` was not `HOST:PORT`.
public struct ServerAddressError: Error, CustomStringConvertible {
    public let text: String
    public var description: String { "--server must be HOST:PORT (e.g. 127.0.0.1:7600), got \"\(text)\"" }
}
