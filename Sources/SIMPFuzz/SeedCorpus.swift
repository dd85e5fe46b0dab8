import NIOCore
import SIMPCore
import SIMPE2E

/// The seed inputs committed under `fuzz/corpus/`: valid messages of every kind and edge
/// cases, named by file. `SeedCorpusTests` checks the committed files are these bytes
/// (`scripts/fuzz seeds` rewrites them).
public enum SeedCorpus {
    /// Datagram target inputs: one encoded message each.
    public static var datagrams: [String: [UInt8]] {
        var seeds: [String: [UInt8]] = [:]
        for (name, message) in messages { seeds[name] = bytes(MessageCodec.encode(message)) }
        seeds["empty"] = []
        seeds["truncated-content"] = Array(seeds["text-alice-bob"]!.dropLast(3))
        // An unknown field (number 99, length-delimited) before the known ones.
        seeds["unknown-field"] = [0x9a, 0x06, 0x02, 0x68, 0x69] + seeds["text-alice-bob"]!
        return seeds
    }

    /// End-to-end target inputs: the decoder's byte (`FuzzEntry.EndToEndDecoder`), then its input.
    public static var endToEnd: [String: [UInt8]] {
        typealias Decoder = FuzzEntry.EndToEndDecoder
        // RFC 8032's first Ed25519 test public key: a valid point, so the identity decodes.
        let signing: [UInt8] = [
            0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe, 0xd3, 0xc9, 0x64, 0x07, 0x3a,
            0x0e, 0xe1, 0x72, 0xf3, 0xda, 0xa6, 0x23, 0x25, 0xaf, 0x02, 0x1a, 0x68, 0xf7, 0x07, 0x51, 0x1a,
        ]
        let prekey = [0, 0, 0, 7] + [UInt8](repeating: 9, count: 32)
        let bundle =
            [1] + [UInt8](repeating: 5, count: 32) + signing + [0, 0, 0, 1] + [UInt8](repeating: 6, count: 32)
            + [UInt8](repeating: 0, count: 64) + [0, 1] + prekey
        let ratchet = [1, 2] + [UInt8](repeating: 3, count: 32) + [0, 0, 0, 0, 0, 0, 0, 1] + [UInt8](repeating: 4, count: 21)
        let envelope = [1, 5, 0, 4] + Array("desk".utf8) + [1, 0, 5] + Array("phone".utf8) + [0, 0, 0, UInt8(ratchet.count)] + ratchet
        let deviceList = signedDeviceList(identity: [UInt8](repeating: 5, count: 32) + signing)
        var forged = deviceList
        forged[forged.count - 1] ^= 1
        let admit = [1, 0x28, 0, 5] + Array("lobby".utf8) + [0, 5] + Array("carol".utf8)
        return [
            "envelope": [Decoder.envelope.rawValue] + envelope,
            "envelope-empty": [Decoder.envelope.rawValue, 1, 5, 0, 0, 0],
            "key-bundle": [Decoder.keyBundle.rawValue] + bundle,
            "key-bundle-truncated": [Decoder.keyBundle.rawValue] + bundle.dropLast(10),
            "one-time-prekey": [Decoder.oneTimePrekey.rawValue] + prekey,
            "pairwise-ratchet": [Decoder.pairwise.rawValue] + ratchet,
            "resend-request": [Decoder.resendRequest.rawValue, 1, 6, 0, 0, 0, 0, 0, 0, 0x10, 0x92],
            "device-list": [Decoder.deviceList.rawValue] + deviceList,
            "device-list-forged": [Decoder.deviceList.rawValue] + forged,
            "room-admit": [Decoder.roomAdmit.rawValue] + admit,
            "empty": [],
        ]
    }

    /// A device list of alice (two devices with identity `identity`, counter 3) signed by a
    /// fixed user key: Ed25519 signatures are deterministic, so the seed's bytes are too.
    private static func signedDeviceList(identity: [UInt8]) -> [UInt8] {
        let key = try! UserSigningKey(secretBytes: [1] + [UInt8](repeating: 0x42, count: 32))
        let identity = try! IdentityKey(agreement: Array(identity.prefix(32)), signing: Array(identity.suffix(32)))
        let devices = ["desk", "phone"].map { ApprovedDevice(device: $0, identity: identity) }
        return try! SignedDeviceList.signed(user: "alice", counter: 3, devices: devices, by: key).encoded
    }

    /// Control target inputs: a read-cutting byte, then a stream of frames.
    public static var controlStreams: [String: [UInt8]] {
        let session: [SIMPMessage] = [
            connect("mallory"), receiptTo("alice"), ping(), messages["text-alice-bob"]!,
            SIMPMessage(kind: .disconnect),
        ]
        var seeds: [String: [UInt8]] = [
            "session": [0x03] + frames(session),
            "session-one-byte-reads": [0x00] + frames(session),
            "connect-twice": [0x11] + frames([connect("mallory"), connect("alice")]),
            "receipt-before-connect": [0x07] + frames([receiptTo("bob")]),
            "registration-fails": [0x85] + frames([connect("mallory"), receiptTo("bob")]),
            "old-version": [0x02]
                + frames([
                    {
                        var m = ping(); m.version = 0; return m
                    }()
                ]),
            "malformed-payload": [0x05] + [0, 0, 0, 3, 0xff, 0xff, 0xff] + frames([ping()]),
            "oversized-announce": [0x01] + frames([ping()]) + [0x7f, 0xff, 0xff, 0xff, 0x00],
            "truncated-frame": [0x09] + Array(frames([connect("mallory")]).dropLast(2)),
            "empty-frame": [0x04, 0, 0, 0, 0],
            "login": [0x06] + frames([auth("mallory"), connect("mallory"), receiptTo("alice"), roomJoin("lobby")]),
            "auth-bad-nonce": [0x0a]
                + frames([
                    {
                        var m = auth("mallory"); m.nonce = [1, 2]; return m
                    }()
                ]),
            // Batch receipts (docs/PROTOCOL.md §6.1): a valid one, and ids written with a
            // difference of 0 (an id twice), which must not decode.
            "receipt-batches": [0x0b]
                + frames([
                    connect("mallory"), batchReceiptTo("alice", ids: [1, 2, 3, 1 << 40]),
                    batchReceiptTo("alice", ids: [5, 5, 6]), ping(),
                ]),
            // HELD receipts (field 52, §6.1): single, then its final receipt, and a HELD batch.
            "receipt-held": [0x0d]
                + frames([
                    connect("mallory"), held(receiptTo("alice")), receiptTo("alice"),
                    held(batchReceiptTo("alice", ids: [1, 2])), ping(),
                ]),
            // Datagrams carried in control frames (docs/PROTOCOL.md §5.5): sealed-looking, unsealed.
            "datagram-frames": [0x0e]
                + frames([
                    connect("mallory"), .carrying(ByteBuffer(bytes: [0xA2] + Array(repeating: 1, count: 40))),
                    .carrying(ByteBuffer(bytes: [1, 2, 3])), ping(),
                ]),
            // End-to-end keys (docs/PROTOCOL.md §4.8): publish, fetch, and a publish with a
            // one-time prekey of the wrong size, which is refused.
            "keys": [0x0e]
                + frames([
                    connect("mallory"), messages["keys-publish"]!, messages["keys-fetch"]!,
                    {
                        var m = messages["keys-publish"]!; m.oneTimePrekeys = [[1, 2, 3]]; return m
                    }(), messages["text-e2e"]!,
                ]),
        ]
        for (name, message) in messages where !message.kind.isContent {
            seeds["single-\(name)"] = [0x1f] + frames([message])
        }
        return seeds
    }

    private static func auth(_ user: String) -> SIMPMessage {
        var auth = SIMPMessage(kind: .auth, fromUser: user)
        auth.nonce = Array(0..<24)
        return auth
    }

    private static func roomJoin(_ room: String) -> SIMPMessage {
        var join = SIMPMessage(kind: .roomJoin, messageId: 3)
        join.room = room
        return join
    }

    private static var messages: [String: SIMPMessage] {
        var text = SIMPMessage(kind: .text, messageId: 1, fromUser: "alice", toUser: "bob", content: "hi", time: 1_700_000_000_000)
        text.attempt = 1
        text.stream = 7
        text.seq = 1
        var image = SIMPMessage(kind: .image, messageId: 2, fromUser: "bob", toUser: "carol")
        image.imageURL = "https://example.com/a.png"
        image.imageScale = 0.5
        var audio = SIMPMessage(kind: .audio, messageId: .max, fromUser: "alice", toUser: "dave", content: String(repeating: "á", count: 300))
        audio.attempt = .max
        var unknownRecipient = text
        unknownRecipient.toUser = "nobody"
        var oldVersion = text
        oldVersion.version = 0
        var receipt = text.receipt(holdMicros: 250)
        receipt.attempt = 2
        var batch = receipt
        batch.receiptIds = [100, 101, 102, 200, .max]
        var pong = SIMPMessage(kind: .pong, messageId: 5)
        pong.time = 1234
        var connected = SIMPMessage(kind: .connected, toUser: "alice")
        connected.udpPort = 7601
        connected.relayId = "relay-1"
        var seeds: [String: SIMPMessage] = [
            "text-alice-bob": text, "image-bob-carol": image, "audio-alice-dave": audio,
            "text-unknown-recipient": unknownRecipient, "text-old-version": oldVersion,
            "text-no-id": SIMPMessage(kind: .text, fromUser: "alice", toUser: "bob"),
            "connect": connect("mallory"), "receipt": receipt, "receipt-batch": batch, "receipt-held": held(receipt),
            "ping": ping(), "pong": pong,
            "connected": connected, "disconnect": SIMPMessage(kind: .disconnect),
            "file-upload": fileUpload(), "file-fetch": fileFetch(), "file-grant": .fileGrant(9, to: "carol", from: "alice"),
        ]
        // End to end: a sealed text (the envelope is opaque to the relay), key frames and answers.
        var sealed = text
        sealed.content = ""
        sealed.e2ePayload = [1, 5, 0, 4] + Array("desk".utf8) + [1, 0, 5] + Array("phone".utf8) + [0, 0, 0, 3, 1, 2, 0]
        var publish = SIMPMessage(kind: .keysPublish, messageId: 10, fromUser: "alice")
        publish.keyBundles = [[1] + Array(repeating: 7, count: 164) + [0, 0]]
        publish.oneTimePrekeys = [Array(repeating: 9, count: 36), Array(repeating: 8, count: 36)]
        var published = SIMPMessage(kind: .keysPublish, messageId: 10, toUser: "alice")
        published.prekeysLeft = 20
        var fetch = SIMPMessage(kind: .keysFetch, messageId: 11, fromUser: "alice", toUser: "bob")
        fetch.members = ["laptop"]
        var fetched = SIMPMessage(kind: .keysFetch, messageId: 11, toUser: "bob")
        fetched.members = ["laptop", "phone"]
        fetched.keyBundles = publish.keyBundles + publish.keyBundles
        fetched.oneTimePrekeys = [[], Array(repeating: 9, count: 36)]
        seeds["text-e2e"] = sealed
        seeds["keys-publish"] = publish
        seeds["keys-published"] = published
        seeds["keys-fetch"] = fetch
        seeds["keys-fetched"] = fetched
        var newDevice = SIMPMessage(kind: .keysPublish, fromUser: "alice", toUser: "alice")
        newDevice.device = "phone-77ab"
        newDevice.loginAddress = "127.0.0.5"
        seeds["keys-new-device"] = newDevice
        for code in SIMPMessage.ErrorCode.allCases where code != .none {
            seeds["error-\(code)"] = .error(code, "error \(code.rawValue)", messageId: 9, to: "alice")
        }
        return seeds
    }

    /// A chunk for the relay to hold for bob (docs/PROTOCOL.md §5.7): the last, 100-byte chunk
    /// of a 2,300-byte file.
    private static func fileUpload() -> SIMPMessage {
        var chunk = SIMPMessage.fileChunk(Array(repeating: 0xA5, count: 116), index: 2, number: 3, fileId: 9, from: "alice", to: "bob")
        chunk.messageId = 0
        return .fileUpload(chunk, fileSize: 2300, chunkSize: 1100)
    }

    /// alice asks the relay for chunks of a file bob left for her.
    private static func fileFetch() -> SIMPMessage {
        var fetch = SIMPMessage.fileFetch(9, ranges: ChunkRanges([0..<4, 9..<12]), from: "bob")
        fetch.fromUser = "alice"
        return fetch
    }

    private static func connect(_ user: String) -> SIMPMessage {
        var connect = SIMPMessage(kind: .connect, fromUser: user)
        connect.udpPort = 5003
        return connect
    }

    private static func receiptTo(_ user: String) -> SIMPMessage {
        SIMPMessage(kind: .text, messageId: 3, fromUser: user, toUser: "mallory").receipt(holdMicros: 10)
    }

    /// `receipt` as a HELD receipt (arrived, held behind a gap).
    private static func held(_ receipt: SIMPMessage) -> SIMPMessage {
        var held = receipt
        held.held = true
        return held
    }

    private static func batchReceiptTo(_ user: String, ids: [UInt64]) -> SIMPMessage {
        var batch = receiptTo(user)
        batch.receiptIds = ids
        return batch
    }

    private static func ping() -> SIMPMessage {
        var ping = SIMPMessage(kind: .ping, messageId: 42)
        ping.time = 1234
        return ping
    }

    private static func frames(_ messages: [SIMPMessage]) -> [UInt8] {
        var buffer = ByteBuffer()
        for message in messages { Framing.writeFrame(message, into: &buffer) }
        return bytes(buffer)
    }

    private static func bytes(_ buffer: ByteBuffer) -> [UInt8] {
        Array(buffer.readableBytesView)
    }
}
