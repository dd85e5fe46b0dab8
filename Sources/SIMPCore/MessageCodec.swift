import CProtobufC
import CSIMPProto
import NIOCore

/// Why bytes could not be decoded into a `SIMPMessage`.
public enum DecodeError: Error, Equatable, Sendable {
    /// protobuf-c rejected the bytes (truncated, bad tags or wire types).
    case malformed
    /// The bytes parsed but `type` or `errorCode` is a value this version does not know.
    case unknownEnumValue
    /// A RECEIPT's `receiptIds` are not a valid batch: more than `SIMPMessage.maxReceiptIds`, a
    /// difference of 0 (an id twice, or id 0), or ids beyond 2^64 - 1.
    case invalidReceiptIds
}

/// Converts `SIMPMessage` to and from protobuf bytes with the protobuf-c generated code.
public enum MessageCodec {
    /// The encoded size of `message` in bytes.
    public static func encodedSize(of message: SIMPMessage) -> Int {
        withCMessage(message) { Int(simp__message__get_packed_size($0)) }
    }

    /// A capacity that usually holds `message`'s encoding (exact sizing would build the C
    /// message twice; `encode(_:into:)` grows the buffer when it falls short).
    public static func estimatedSize(of message: SIMPMessage) -> Int {
        64 + message.content.utf8.count + message.e2ePayload.count + message.chunk.count + 8 * message.fileRanges.count
    }

    /// Appends the protobuf encoding of `message` to `buffer`.
    public static func encode(_ message: SIMPMessage, into buffer: inout ByteBuffer) {
        withCMessage(message) { cMessage in
            let size = Int(simp__message__get_packed_size(cMessage))
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { out in
                Int(simp__message__pack(cMessage, out.baseAddress!.assumingMemoryBound(to: UInt8.self)))
            }
        }
    }

    /// The protobuf encoding of `message` in a new buffer.
    public static func encode(_ message: SIMPMessage, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: estimatedSize(of: message))
        encode(message, into: &buffer)
        return buffer
    }

    /// Decodes all readable bytes of `buffer` (without moving its reader index).
    public static func decode(_ buffer: ByteBuffer) throws -> SIMPMessage {
        try buffer.withUnsafeReadableBytes { bytes in
            try decode(UnsafeRawBufferPointer(bytes))
        }
    }

    /// Decodes a complete protobuf-encoded message.
    public static func decode(_ bytes: UnsafeRawBufferPointer) throws -> SIMPMessage {
        // protobuf-c needs a non-null pointer even for an empty (all-default) message.
        var empty: UInt8 = 0
        let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? withUnsafePointer(to: &empty) { $0 }
        guard let unpacked = simp__message__unpack(nil, bytes.count, base) else { throw DecodeError.malformed }
        defer { simp__message__free_unpacked(unpacked, nil) }
        let c = unpacked.pointee
        guard let kind = SIMPMessage.Kind(rawValue: Int32(bitPattern: c.type.rawValue)),
            let errorCode = SIMPMessage.ErrorCode(rawValue: Int32(bitPattern: c.errorcode.rawValue)),
            let status = SIMPMessage.DeliveryStatus(rawValue: Int32(bitPattern: c.status.rawValue))
        else { throw DecodeError.unknownEnumValue }
        var message = SIMPMessage(
            kind: kind, messageId: c.messageid, fromUser: string(c.fromuser), toUser: string(c.touser),
            content: string(c.content), time: c.time)
        message.version = c.version
        message.imageURL = string(c.imageurl)
        message.imageScale = c.imagescale
        message.attempt = c.attempt
        message.holdMicros = c.holdmicros
        message.errorCode = errorCode
        message.errorText = string(c.errortext)
        message.udpPort = c.udpport
        message.relayId = string(c.relayid)
        message.stream = c.stream
        message.seq = c.seq
        message.floor = c.floor
        message.custodyFloor = c.custodyfloor
        message.nonce = byteArray(c.nonce)
        message.salt = byteArray(c.salt)
        message.iterations = c.iterations
        message.proof = byteArray(c.proof)
        message.sessionId = c.sessionid
        message.sessionSecret = byteArray(c.sessionsecret)
        message.retryAfterMillis = c.retryaftermillis
        message.maxDatagramSize = c.maxdatagramsize
        message.status = status
        message.room = string(c.room)
        message.members = (0..<c.n_members).map { string(c.members[$0]) }
        message.author = string(c.author)
        message.authorMessageId = c.authormessageid
        message.memberCount = c.membercount
        message.deliveredCount = c.deliveredcount
        guard c.presence.rawValue <= 1 else { throw DecodeError.unknownEnumValue }
        message.online = c.presence.rawValue == 1
        message.lastSeen = c.lastseen
        message.device = string(c.device)
        message.loginAddress = string(c.loginaddress)
        message.sendOnly = c.sendonly != 0
        message.batchReceipts = c.batchreceipts != 0
        message.held = c.held != 0
        message.messageRateLimit = c.messageratelimit
        message.acceptsBatchReceipts = c.acceptsbatchreceipts != 0
        message.receiverOnline = c.receiveronline != 0
        message.datagram = byteArray(c.datagram)
        message.token = string(c.token)
        message.tokenExpires = c.tokenexpires
        message.e2ePayload = byteArray(c.e2epayload)
        message.keyBundles = (0..<c.n_keybundles).map { byteArray(c.keybundles[$0]) }
        message.oneTimePrekeys = (0..<c.n_onetimeprekeys).map { byteArray(c.onetimeprekeys[$0]) }
        message.prekeysLeft = c.prekeysleft
        message.devicesLeftOut = c.devicesleftout
        message.fileId = c.fileid
        message.chunkIndex = c.chunkindex
        message.chunk = byteArray(c.chunk)
        message.fileRanges = Array(UnsafeBufferPointer(start: c.fileranges, count: c.n_fileranges))
        message.fileSeq = c.fileseq
        message.fileChunkSize = c.filechunksize
        message.fileDone = c.filedone != 0
        message.fileKey = byteArray(c.filekey)
        message.fileSize = c.filesize
        message.fileDigest = byteArray(c.filedigest)
        message.deviceList = byteArray(c.devicelist)
        message.receiptIds = try receiptIds(deltas: UnsafeBufferPointer(start: c.receiptids, count: c.n_receiptids))
        return message
    }

    /// The absolute ids of a batch written as differences (docs/PROTOCOL.md §6.1); O(count),
    /// never O(range).
    static func receiptIds(deltas: UnsafeBufferPointer<UInt64>) throws -> [UInt64] {
        guard !deltas.isEmpty else { return [] }
        guard deltas.count <= SIMPMessage.maxReceiptIds else { throw DecodeError.invalidReceiptIds }
        var decoder = ReceiptIdDeltas()
        var ids: [UInt64] = []
        ids.reserveCapacity(deltas.count)
        for delta in deltas {
            guard let id = decoder.add(delta) else { throw DecodeError.invalidReceiptIds }
            ids.append(id)
        }
        return ids
    }

    private static func string(_ pointer: UnsafeMutablePointer<CChar>?) -> String {
        guard let pointer, pointer.pointee != 0 else { return "" }
        return String(cString: pointer)
    }

    private static func byteArray(_ data: ProtobufCBinaryData) -> [UInt8] {
        guard data.len > 0, let pointer = data.data else { return [] }
        return Array(UnsafeBufferPointer(start: pointer, count: data.len))
    }

    /// Builds the C struct for `message`, with every string in one NUL-separated scratch buffer
    /// and every bytes field in another (a handful of allocations per call, not one per field).
    private static func withCMessage<R>(_ message: SIMPMessage, _ body: (UnsafePointer<Simp__Message>) -> R) -> R {
        var strings = CStringScratch(capacity: estimatedSize(of: message))
        let content = strings.add(message.content), imageURL = strings.add(message.imageURL)
        let fromUser = strings.add(message.fromUser), toUser = strings.add(message.toUser)
        let errorText = strings.add(message.errorText), relayId = strings.add(message.relayId)
        let room = strings.add(message.room), author = strings.add(message.author), device = strings.add(message.device)
        let loginAddress = strings.add(message.loginAddress), token = strings.add(message.token)
        let memberOffsets = message.members.map { strings.add($0) }
        // Bytes fields: one contiguous copy; empty fields are skipped by protobuf-c.
        var binary = message.nonce + message.salt + message.proof + message.sessionSecret + message.datagram + message.e2ePayload
        binary += message.chunk + message.fileKey + message.fileDigest + message.deviceList
        for bytes in message.keyBundles + message.oneTimePrekeys { binary += bytes }
        return strings.bytes.withUnsafeMutableBufferPointer { stringBytes in
            binary.withUnsafeMutableBufferPointer { binaryBytes in
                let base = UnsafeMutableRawPointer(stringBytes.baseAddress!).assumingMemoryBound(to: CChar.self)
                // Called in the order the fields were concatenated into `binary`.
                var binaryOffset = 0
                func binaryField(_ length: Int) -> ProtobufCBinaryData {
                    defer { binaryOffset += length }
                    return ProtobufCBinaryData(len: length, data: length == 0 ? nil : binaryBytes.baseAddress! + binaryOffset)
                }
                var c = Simp__Message()
                simp__message__init(&c)
                c.version = message.version
                c.messageid = message.messageId
                c.time = message.time
                c.content = base + content
                c.imageurl = base + imageURL
                c.fromuser = base + fromUser
                c.touser = base + toUser
                c.type = Simp__Message__Type(rawValue: UInt32(bitPattern: message.kind.rawValue))
                c.imagescale = message.imageScale
                c.attempt = message.attempt
                c.holdmicros = message.holdMicros
                c.errorcode = Simp__Message__ErrorCode(rawValue: UInt32(bitPattern: message.errorCode.rawValue))
                c.errortext = base + errorText
                c.udpport = message.udpPort
                c.relayid = base + relayId
                c.stream = message.stream
                c.seq = message.seq
                c.floor = message.floor
                c.custodyfloor = message.custodyFloor
                c.nonce = binaryField(message.nonce.count)
                c.salt = binaryField(message.salt.count)
                c.iterations = message.iterations
                c.proof = binaryField(message.proof.count)
                c.sessionid = message.sessionId
                c.sessionsecret = binaryField(message.sessionSecret.count)
                c.datagram = binaryField(message.datagram.count)
                c.retryaftermillis = message.retryAfterMillis
                c.maxdatagramsize = message.maxDatagramSize
                c.status = Simp__Message__DeliveryStatus(rawValue: UInt32(bitPattern: message.status.rawValue))
                c.room = base + room
                c.author = base + author
                c.authormessageid = message.authorMessageId
                c.membercount = message.memberCount
                c.deliveredcount = message.deliveredCount
                c.presence = Simp__Message__Presence(rawValue: message.online ? 1 : 0)
                c.lastseen = message.lastSeen
                c.device = base + device
                c.loginaddress = base + loginAddress
                c.token = base + token
                c.tokenexpires = message.tokenExpires
                c.sendonly = message.sendOnly ? 1 : 0
                c.batchreceipts = message.batchReceipts ? 1 : 0
                c.held = message.held ? 1 : 0
                c.messageratelimit = message.messageRateLimit
                c.acceptsbatchreceipts = message.acceptsBatchReceipts ? 1 : 0
                c.receiveronline = message.receiverOnline ? 1 : 0
                c.e2epayload = binaryField(message.e2ePayload.count)
                c.chunk = binaryField(message.chunk.count)
                c.filekey = binaryField(message.fileKey.count)
                c.filedigest = binaryField(message.fileDigest.count)
                c.devicelist = binaryField(message.deviceList.count)
                c.fileid = message.fileId
                c.chunkindex = message.chunkIndex
                c.fileseq = message.fileSeq
                c.filechunksize = message.fileChunkSize
                c.filedone = message.fileDone ? 1 : 0
                c.filesize = message.fileSize
                var keyBundles = message.keyBundles.map { binaryField($0.count) }
                var oneTimePrekeys = message.oneTimePrekeys.map { binaryField($0.count) }
                c.prekeysleft = message.prekeysLeft
                c.devicesleftout = message.devicesLeftOut
                var members: [UnsafeMutablePointer<CChar>?] = memberOffsets.map { base + $0 }
                var previous: UInt64 = 0
                var deltas = message.receiptIds.map { id in
                    defer { previous = id }; return id &- previous
                }
                var fileRanges = message.fileRanges
                return fileRanges.withUnsafeMutableBufferPointer { ranges in
                    c.n_fileranges = ranges.count
                    c.fileranges = ranges.baseAddress
                    return members.withUnsafeMutableBufferPointer { pointers in
                        c.n_members = pointers.count
                        c.members = pointers.baseAddress
                        return deltas.withUnsafeMutableBufferPointer { ids in
                            c.n_receiptids = ids.count
                            c.receiptids = ids.baseAddress
                            return keyBundles.withUnsafeMutableBufferPointer { bundles in
                                c.n_keybundles = bundles.count
                                c.keybundles = bundles.baseAddress
                                return oneTimePrekeys.withUnsafeMutableBufferPointer { prekeys in
                                    c.n_onetimeprekeys = prekeys.count
                                    c.onetimeprekeys = prekeys.baseAddress
                                    return withUnsafePointer(to: &c) { body($0) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// NUL-terminated UTF-8 copies of a message's strings, back to back in one buffer.
private struct CStringScratch {
    var bytes: [UInt8] = []

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    /// Appends `string` and its terminating NUL; returns the offset it starts at.
    mutating func add(_ string: String) -> Int {
        let start = bytes.count
        bytes.append(contentsOf: string.utf8)
        bytes.append(0)
        return start
    }
}

/// Turns the differences that carry `receiptIds` (field 50) back into ids, one at a time, and
/// refuses what makes a batch invalid (docs/PROTOCOL.md §6.1): a zero difference, an id past
/// `UInt64.max`, more than `SIMPMessage.maxReceiptIds`. The full decoder and the relay's header
/// parser (`DatagramHeader.parse`) both use it, so they refuse the same frames.
struct ReceiptIdDeltas {
    static let field: UInt64 = 50
    private var count = 0
    private var previous: UInt64 = 0

    /// The id the next difference `delta` names; nil where the batch is invalid.
    mutating func add(_ delta: UInt64) -> UInt64? {
        let (id, overflow) = previous.addingReportingOverflow(delta)
        guard delta != 0, !overflow, count < SIMPMessage.maxReceiptIds else { return nil }
        previous = id
        count += 1
        return id
    }
}
