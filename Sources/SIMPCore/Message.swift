import NIOCore

/// One SIMP message: the payload of every UDP datagram and every TCP control frame.
///
/// Mirrors `proto/simp.proto`; `MessageCodec` converts it to and from the protobuf-c wire form.
public struct SIMPMessage: Equatable, Sendable {
    /// What the message is; raw values are the wire values of `simp.Message.Type`.
    public enum Kind: Int32, Sendable, CaseIterable {
        case text = 0, image = 1, audio = 2, connect = 3, receipt = 4
        case connected = 5, error = 6, ping = 7, pong = 8, disconnect = 9
        case auth = 10, challenge = 11, hello = 12
        case roomJoin = 15, roomLeave = 16, roomMembers = 17
        case typing = 18, read = 19, who = 20, presence = 21
        /// A sealed datagram carried in a control frame (`datagram`), when UDP does not get
        /// through (docs/PROTOCOL.md §5.5).
        case datagram = 25
        /// End-to-end key bundles (docs/PROTOCOL.md §4.8): publish this device's, fetch a user's.
        case keysPublish = 22, keysFetch = 23
        /// A new access token for the session (`token`), and the relay's answer (`tokenExpires`;
        /// docs/PROTOCOL.md §4.9).
        case tokenRefresh = 26
        /// Files (docs/PROTOCOL.md §5.6): a chunk sealed end to end, and the receiver's
        /// selective acknowledgement of the chunks it holds.
        case fileChunk = 28, fileAck = 29
        /// Files the relay holds for an offline receiver (docs/PROTOCOL.md §5.7): a receiver's
        /// request for held chunks, and a chunk for the relay to hold.
        case fileFetch = 54, fileUpload = 55
        /// A sender's grant of a file the relay holds whole to a second receiver (docs/PROTOCOL.md §5.7).
        case fileGrant = 58

        /// Whether this kind is user content carried over UDP and receipted (TEXT, IMAGE, AUDIO).
        public var isContent: Bool { self == .text || self == .image || self == .audio }

        /// Whether the relay forwards this kind at most once and never stores it: TYPING, and
        /// the datagrams of a file transfer, whose sender recovers losses itself.
        public var isNeverStored: Bool { self == .typing || self == .fileChunk || self == .fileAck }

        /// Which of a user's sessions a datagram of this kind goes to on other relays: TYPING
        /// to every receiving session, FILE_ACK to every session (a file's sender may be a
        /// send-only `simp send --file`); `nil` for the rest, which follow the route of the
        /// user's one receiving device (or go to the inboxes).
        public var fanOut: FanOut? {
            switch self {
            case .typing: return .receivers
            case .fileAck: return .everySession
            default: return nil
            }
        }
    }

    /// The sessions of a user a datagram is copied to (`Kind.fanOut`).
    public enum FanOut: Sendable {
        /// Every session that receives messages.
        case receivers
        /// Every session, send-only ones included.
        case everySession
    }

    /// Why the relay refused something; raw values are the wire values of `simp.Message.ErrorCode`.
    public enum ErrorCode: Int32, Sendable, CaseIterable {
        case none = 0, unknownRecipient = 1, badRequest = 2, notConnected = 3, frameTooLarge = 4
        case unsupportedVersion = 5, `internal` = 6, alreadyConnected = 7
        case authFailed = 8, authRequired = 9, rateLimited = 10, senderMismatch = 11
        /// An operator ended the user's sessions (`simp-server sessions end`); the client may
        /// log in again (a locked user's login is then refused).
        case sessionEnded = 12
        /// A message was refused, not stored: the receiver's log holds the most entries it may
        /// (docs/PROTOCOL.md §6.6); what it holds stays.
        case inboxFull = 16
        /// A stored message was discarded because it waited longer than the inbox TTL.
        case inboxExpired = 17
        /// Posting to, or listing, a room the user is not a member of.
        case notAMember = 18
        /// Refused: it would exceed a bound on what the relay keeps (rooms one user is in,
        /// members of one room; docs/OPERATIONS.md §10).
        case limitReached = 19
        /// An access token was refused (wrong key or signature, audience, issuer or user, not
        /// valid yet, revoked; docs/PROTOCOL.md §4.9); the text says which.
        case tokenRefused = 20
        /// An access token presented after its expiry.
        case tokenExpired = 21
        /// This relay takes no access tokens, or not over plain TCP from this address.
        case tokenNotAccepted = 22
        /// The session's access token expired without a new one: the relay ended the session.
        case tokenSessionExpired = 23
        /// KEYS_PUBLISH refused: the bundle does not decode, has a public key of small order,
        /// or its prekey signature does not verify (docs/E2E.md §3.3).
        case badKeyBundle = 28
        /// FILE_ACK: the receiver will not take the file (too large, disk full, digest
        /// mismatch); `errorText` says why.
        case fileRefused = 24
        /// FILE_ACK from the relay: it will not hold the file (over the per-file or per-user
        /// quota, or it holds no files; docs/PROTOCOL.md §5.7); `errorText` says which.
        case fileQuotaExceeded = 44
        /// FILE_ACK from the relay answering FILE_FETCH: it holds no such file for this user.
        case fileNotHeld = 45
    }

    /// RECEIPT only: what the receipt reports; raw values are the wire values of `simp.Message.DeliveryStatus`.
    public enum DeliveryStatus: Int32, Sendable, CaseIterable {
        /// The receiver got the message (the receiver's own receipt).
        case delivered = 0
        /// The receiver is offline; the relay stored the message in its inbox.
        case stored = 1
        /// A stored message reached its receiver (the relay's receipt to the original sender).
        case deliveredFromInbox = 2
        /// Relay -> author of a room message: `deliveredCount` of `memberCount` members have it.
        case roomDelivered = 3
    }

    /// The protocol version this implementation speaks.
    public static let currentVersion: UInt32 = 1

    public var version: UInt32 = SIMPMessage.currentVersion
    public var messageId: UInt64 = 0
    /// Sender's wall clock at creation, milliseconds since the Unix epoch.
    public var time: Int64 = 0
    public var content: String = ""
    public var imageURL: String = ""
    public var fromUser: String = ""
    public var toUser: String = ""
    public var kind: Kind = .text
    public var imageScale: Float = 0
    /// Transmission number (1 for the first send); a RECEIPT echoes the one it answers.
    public var attempt: UInt32 = 0
    /// RECEIPT only: how long the receiver held the datagram before receipting it.
    public var holdMicros: UInt32 = 0
    public var errorCode: ErrorCode = .none
    public var errorText: String = ""
    /// CONNECT: the client's UDP port. CONNECTED: the relay's UDP port.
    public var udpPort: UInt32 = 0
    /// CONNECTED: the id of the relay holding the session.
    public var relayId: String = ""
    /// The sender's stream id (fixed per sender instance); 0 for unordered messages.
    public var stream: UInt64 = 0
    /// Position in the (stream, toUser) conversation, from 1; 0 for unordered messages.
    public var seq: UInt64 = 0
    /// Every `seq` below this is resolved by the sender: the receiver need not wait for it.
    public var floor: UInt64 = 0
    /// Every `seq` below this is resolved by the sender or in a relay's custody (STORED): a
    /// relay handing over stored messages may skip such a seq it does not hold, never a higher
    /// one, which the sender may still be sending (docs/PROTOCOL.md §6.6). 0: not said.
    public var custodyFloor: UInt64 = 0
    /// AUTH: the client's nonce. CHALLENGE: the relay's nonce.
    public var nonce: [UInt8] = []
    /// CHALLENGE: the user's password salt.
    public var salt: [UInt8] = []
    /// CHALLENGE: PBKDF2 iterations; 0 when the relay does not authenticate.
    public var iterations: UInt32 = 0
    /// CONNECT: the client proof. CONNECTED: the relay's signature.
    public var proof: [UInt8] = []
    /// CONNECTED: the id sealed datagrams of this session carry.
    public var sessionId: UInt64 = 0
    /// CONNECTED from a relay that does not authenticate: the session secret, in clear.
    public var sessionSecret: [UInt8] = []
    /// ERROR RATE_LIMITED: milliseconds after which trying again may succeed.
    public var retryAfterMillis: UInt32 = 0
    /// CONNECTED: the largest sealed datagram the relay accepts, in bytes (0: the default,
    /// `SealedDatagram.defaultMaxDatagramSize`).
    public var maxDatagramSize: UInt32 = 0
    /// RECEIPT only: delivered, stored for an offline receiver, or delivered from the inbox.
    public var status: DeliveryStatus = .delivered
    /// ROOM_* frames: the room's name. Room copies and their receipts to the author: the room.
    public var room: String = ""
    /// ROOM_MEMBERS answer: the room's members.
    public var members: [String] = []
    /// Room copy (its `fromUser` is `#room`): the member who posted it.
    public var author: String = ""
    /// Room copy: the author's own id for the message.
    public var authorMessageId: UInt64 = 0
    /// Room copy, and STORED / ROOM_DELIVERED receipts to the author: how many members it was addressed to.
    public var memberCount: UInt32 = 0
    /// ROOM_DELIVERED receipt: how many members have it.
    public var deliveredCount: UInt32 = 0
    /// PRESENCE: whether `fromUser` is now online.
    public var online: Bool = false
    /// PRESENCE: when `fromUser` was last connected, ms since the epoch (now, if online).
    public var lastSeen: Int64 = 0
    /// AUTH and CONNECT: the client's device name; empty for the user's default device.
    public var device: String = ""
    /// CONNECT: the session only sends; the relay never gives it content or stored messages.
    public var sendOnly: Bool = false
    /// CONNECT: nobody is shown this user's presence or last-seen (docs/PROTOCOL.md §4.8).
    public var hidePresence: Bool = false
    /// RECEIPT (DELIVERED) only: further ids of `toUser`'s messages this receipt covers besides
    /// `messageId`, strictly ascending, at most `maxReceiptIds` (docs/PROTOCOL.md §6.1). On the
    /// wire each is the difference to the previous one; `attempt` and `holdMicros` still describe
    /// `messageId` alone. ERROR RATE_LIMITED about control requests: the other requests refused
    /// with `messageId` during the same pause (docs/PROTOCOL.md §2.6).
    public var receiptIds: [UInt64] = []
    /// CONNECTED: the relay routes batch receipts (`receiptIds`); a client batches only then,
    /// since a relay without them would drop the ids when it re-encodes a receipt.
    public var batchReceipts: Bool = false
    /// RECEIPT (DELIVERED) only: the message arrived but is held behind a gap, so the application
    /// does not have it yet; a final receipt (`held` false) follows when it is released.
    public var held: Bool = false
    /// CONNECTED: how many content messages per second the relay admits from this user
    /// (0: the relay does not say).
    public var messageRateLimit: UInt32 = 0
    /// CONNECT: this client, as a sender, reads batch receipts (`receiptIds`); the relay sends a
    /// client that does not say so single receipts only (docs/PROTOCOL.md §6.1).
    public var acceptsBatchReceipts: Bool = false
    /// RECEIPT (STORED) only: a receiving device of the receiver is connected to the relay that
    /// stored the message and is getting it now: the receiver is not offline (docs/PROTOCOL.md §6.6).
    public var receiverOnline: Bool = false
    /// DATAGRAM only: one sealed datagram, byte for byte as it would cross UDP (docs/PROTOCOL.md §5.5).
    public var datagram: [UInt8] = []
    /// CONNECT: log in with this access token (a JWT); TOKEN_REFRESH: the session's new token
    /// (docs/PROTOCOL.md §4.9). Never logged.
    public var token: String = ""
    /// CONNECTED and the TOKEN_REFRESH answer: when the session's token expires, in ms since
    /// the epoch (0: the session has no token).
    public var tokenExpires: Int64 = 0
    /// Content messages: the end-to-end envelope (docs/E2E.md §11); `content`, `imageURL` and
    /// `imageScale` travel only inside it. Opaque to the relay. Empty: not end-to-end encrypted.
    public var e2ePayload: [UInt8] = []
    /// KEYS_PUBLISH: this device's bundle without one-time prekeys (one). KEYS_FETCH answer: one
    /// bundle per device named in `members`, in the same order.
    public var keyBundles: [[UInt8]] = []
    /// KEYS_PUBLISH: new one-time prekeys (36 bytes each). KEYS_FETCH answer: the prekey claimed
    /// for each device in `members` (empty: none left, or not asked for).
    public var oneTimePrekeys: [[UInt8]] = []
    /// KEYS_PUBLISH answer: how many one-time prekeys of this device the relay holds now.
    public var prekeysLeft: UInt32 = 0
    /// KEYS_PUBLISH notice to the user's own devices: the IP address its new device logged in from.
    public var loginAddress: String = ""
    /// KEYS_FETCH answer: how many devices were left out because their bundles did not fit in
    /// the answer's frame (docs/PROTOCOL.md §4.8).
    public var devicesLeftOut: UInt32 = 0
    /// KEYS_PUBLISH: the user's device list signed by the user's key (docs/E2E.md §3.4), kept
    /// by the relay in place of the earlier one; KEYS_FETCH answer: the list kept for `toUser`
    /// (empty: none). The relay checks only its shape.
    public var deviceList: [UInt8] = []
    /// The key directory log (docs/E2E.md §18): KEYS_FETCH answer fields, all empty or zero
    /// when the answer carries no device list.
    public var directoryProof = DirectoryProof()

    /// FILE_CHUNK, FILE_ACK and a file's announcement: the transfer's random id.
    public var fileId: UInt64 = 0
    /// FILE_CHUNK: the chunk's index, from 0.
    public var chunkIndex: UInt64 = 0
    /// FILE_CHUNK: the chunk sealed with the file's key (`FileChunkCipher`).
    public var chunk: [UInt8] = []
    /// FILE_ACK: the chunks the receiver holds, in `ChunkRanges.wireForm`.
    public var fileRanges: [UInt64] = []
    /// FILE_CHUNK: the transmission's number. FILE_ACK: the highest number the receiver has seen.
    public var fileSeq: UInt64 = 0
    /// A file's announcement: plaintext bytes per chunk.
    public var fileChunkSize: UInt32 = 0
    /// FILE_ACK: the receiver has the whole file and its digest matched.
    public var fileDone: Bool = false
    /// A file's announcement: the file's AES-256-GCM key.
    public var fileKey: [UInt8] = []
    /// A file's announcement: the file's size in bytes.
    public var fileSize: UInt64 = 0
    /// A file's announcement: SHA-256 of the file's plaintext.
    public var fileDigest: [UInt8] = []
    /// A file's announcement (end to end only): the room the file was sent to, without `#`
    /// (empty: sent to this user alone). The receiver shows it as a room file only if it and
    /// the sender are members of that room (docs/E2E.md §17).
    public var fileRoom: String = ""
    /// FILE_ACK: the relay's acknowledgement, for the chunks it holds for an offline receiver
    /// (with `fileDone`: the whole file; docs/PROTOCOL.md §5.7).
    public var fileHeld: Bool = false
    /// FILE_ACK on the control channel, from the relay to the uploader of a file it held: the
    /// receiver's `device` has the whole file, its digest matched (docs/PROTOCOL.md §5.7).
    public var fileReceived: Bool = false

    /// The most `receiptIds` one receipt may carry; a frame with more does not decode.
    public static let maxReceiptIds = 1024

    public init(
        kind: Kind = .text, messageId: UInt64 = 0, fromUser: String = "", toUser: String = "",
        content: String = "", time: Int64 = 0
    ) {
        self.kind = kind
        self.messageId = messageId
        self.fromUser = fromUser
        self.toUser = toUser
        self.content = content
        self.time = time
    }
}

extension SIMPMessage {
    /// The receipt a receiver sends for `self` (a content message), echoing its id and attempt.
    public func receipt(holdMicros: UInt32) -> SIMPMessage {
        var receipt = SIMPMessage(kind: .receipt, messageId: messageId, fromUser: toUser, toUser: fromUser)
        receipt.attempt = attempt
        receipt.holdMicros = holdMicros
        return receipt
    }

    /// A DATAGRAM control frame carrying `sealed`, a sealed datagram (docs/PROTOCOL.md §5.5).
    public static func carrying(_ sealed: ByteBuffer) -> SIMPMessage {
        var frame = SIMPMessage(kind: .datagram)
        frame.datagram = Array(sealed.readableBytesView)
        return frame
    }

    /// An ERROR control message about message `messageId`, addressed to `user`.
    public static func error(_ code: ErrorCode, _ text: String, messageId: UInt64 = 0, to user: String = "") -> SIMPMessage {
        var error = SIMPMessage(kind: .error, messageId: messageId, toUser: user)
        error.errorCode = code
        error.errorText = text
        return error
    }
}
