import NIOCore

/// "Deliver this payload to user U wherever U is": what one relay hands another through Redis
/// pub/sub (channel `simp:relay:{<relayId>}:deliver`, docs/PROTOCOL.md §7.7).
///
/// The relay holding `user` hands the payload to it with `RelayCore.deliverToLocalUser`: a
/// datagram goes out of that relay's UDP socket, a control message down the user's control
/// connection. Features that need to reach a user on any relay (receipts today; rooms,
/// inboxes and relay-originated messages later) build one of these.
public struct RelayDelivery: Equatable, Sendable {
    /// What the payload is, and so how it reaches the user.
    public enum Payload: Equatable, Sendable {
        /// An encoded `Message` (a datagram's payload, already checked by the relay it entered),
        /// sealed for the user's session by the relay that holds it and sent over UDP.
        case datagram(ByteBuffer)
        /// A control message (e.g. a RECEIPT), sent as a frame on the user's control connection.
        case control(SIMPMessage)
        /// An entry just stored in the user's inbox (in Redis): the relay holding the user hands
        /// it over now instead of at the user's next connect.
        case inboxEntry(InboxEntry)
    }

    /// The user the payload is for.
    public var user: String
    public var payload: Payload
    /// How many relays have already handed this payload on (0 from the relay it entered).
    public var hops: UInt8

    public init(user: String, payload: Payload, hops: UInt8 = 0) {
        self.user = user
        self.payload = payload
        self.hops = hops
    }

    /// Why bytes from the channel are not a delivery.
    public struct DecodingError: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    private static let datagramTag: UInt8 = 0x44 // "D"
    private static let controlTag: UInt8 = 0x43 // "C"
    private static let inboxTag: UInt8 = 0x49 // "I"
    /// Longest user id accepted in an envelope.
    public static let maxUserLength = 1024

    /// The envelope: tag (`D` datagram / `C` control / `I` inbox entry), hops (1 byte), user
    /// length (2 bytes, big endian), user (UTF-8), then the encoded `Message` (for `I`: the
    /// entry's text as kept in Redis).
    public func encoded(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 4 + user.utf8.count + 64)
        switch payload {
        case .datagram(let bytes):
            buffer.writeInteger(Self.datagramTag)
            writeHeader(into: &buffer)
            var bytes = bytes
            buffer.writeBuffer(&bytes)
        case .control(let message):
            buffer.writeInteger(Self.controlTag)
            writeHeader(into: &buffer)
            MessageCodec.encode(message, into: &buffer)
        case .inboxEntry(let entry):
            buffer.writeInteger(Self.inboxTag)
            writeHeader(into: &buffer)
            buffer.writeString(entry.text)
        }
        return buffer
    }

    private func writeHeader(into buffer: inout ByteBuffer) {
        buffer.writeInteger(hops)
        buffer.writeInteger(UInt16(user.utf8.count))
        buffer.writeString(user)
    }

    /// Reads an envelope; throws on anything malformed (the caller counts and drops it).
    public static func decode(_ bytes: ByteBuffer) throws -> RelayDelivery {
        var buffer = bytes
        guard let tag = buffer.readInteger(as: UInt8.self), let hops = buffer.readInteger(as: UInt8.self),
            let length = buffer.readInteger(as: UInt16.self)
        else {
            throw DecodingError(description: "envelope of \(bytes.readableBytes) bytes is too short")
        }
        guard length > 0, length <= maxUserLength, let user = buffer.readString(length: Int(length)) else {
            throw DecodingError(description: "bad user length \(length)")
        }
        switch tag {
        case datagramTag:
            return RelayDelivery(user: user, payload: .datagram(buffer), hops: hops)
        case controlTag:
            return RelayDelivery(user: user, payload: .control(try MessageCodec.decode(buffer)), hops: hops)
        case inboxTag:
            guard let text = buffer.readString(length: buffer.readableBytes), let entry = InboxEntry(text: text) else {
                throw DecodingError(description: "bad inbox entry")
            }
            return RelayDelivery(user: user, payload: .inboxEntry(entry), hops: hops)
        default:
            throw DecodingError(description: "unknown envelope tag \(tag)")
        }
    }
}

/// A relay's announcement that `user` now has its session on `relayId` (channel `simp:moves`):
/// every other relay forgets its cached route and closes a stale local session.
public struct UserMove: Equatable, Sendable {
    public var user: String
    public var relayId: String
    public init(user: String, relayId: String) {
        self.user = user
        self.relayId = relayId
    }

    /// `relayId` + space + `user` (relay ids contain no spaces).
    public var encoded: String { "\(relayId) \(user)" }

    /// Parses `encoded`, or nil if malformed.
    public init?(encoded text: String) {
        guard let space = text.firstIndex(of: " ") else { return nil }
        let relay = String(text[..<space]), user = String(text[text.index(after: space)...])
        guard !relay.isEmpty, !user.isEmpty else { return nil }
        self.init(user: user, relayId: relay)
    }
}
