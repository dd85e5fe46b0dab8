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
        encode(message, into: &buffer, lengthPrefix: false)
    }

    /// Appends the protobuf encoding of `message` to `buffer`, after its length as 4 bytes
    /// big-endian when `lengthPrefix` (a control frame, `Framing.writeFrame`): one write either way.
    static func encode(_ message: SIMPMessage, into buffer: inout ByteBuffer, lengthPrefix: Bool) {
        withCMessage(message) { cMessage in
            let size = Int(simp__message__get_packed_size(cMessage))
            let prefix = lengthPrefix ? Framing.headerSize : 0
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: prefix + size) { out in
                if lengthPrefix { out.storeBytes(of: UInt32(size).bigEndian, as: UInt32.self) }
                return prefix + Int(simp__message__pack(cMessage, (out.baseAddress! + prefix).assumingMemoryBound(to: UInt8.self)))
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
        message.members = c.n_members == 0 ? [] : (0..<c.n_members).map { string(c.members[$0]) }
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
        message.hidePresence = c.hidepresence != 0
        message.batchReceipts = c.batchreceipts != 0
        message.held = c.held != 0
        message.messageRateLimit = c.messageratelimit
        message.acceptsBatchReceipts = c.acceptsbatchreceipts != 0
        message.receiverOnline = c.receiveronline != 0
        message.datagram = byteArray(c.datagram)
        message.token = string(c.token)
        message.tokenExpires = c.tokenexpires
        message.e2ePayload = byteArray(c.e2epayload)
        message.keyBundles = c.n_keybundles == 0 ? [] : (0..<c.n_keybundles).map { byteArray(c.keybundles[$0]) }
        message.oneTimePrekeys = c.n_onetimeprekeys == 0 ? [] : (0..<c.n_onetimeprekeys).map { byteArray(c.onetimeprekeys[$0]) }
        message.prekeysLeft = c.prekeysleft
        message.devicesLeftOut = c.devicesleftout
        message.deviceList = byteArray(c.devicelist)
        let directoryBytes = c.treehead.len | c.treekey.len | c.inclusionproof.len | c.consistencyproof.len
        if directoryBytes | c.directorycheckpoint.len | c.peerconsistencyproof.len != 0 || c.logindex | c.knowntreesize | c.peertreesize != 0 {
            message.directoryProof = DirectoryProof(
                treeHead: byteArray(c.treehead), treeKey: byteArray(c.treekey), logIndex: c.logindex,
                inclusionProof: byteArray(c.inclusionproof), knownTreeSize: c.knowntreesize, consistencyProof: byteArray(c.consistencyproof))
            message.directoryProof.directoryCheckpoint = byteArray(c.directorycheckpoint)
            message.directoryProof.peerTreeSize = c.peertreesize
            message.directoryProof.peerConsistencyProof = byteArray(c.peerconsistencyproof)
        }
        // Bitwise or, not `||` (whose autoclosures would each copy `c`): any file field set.
        let fileNumbers =
            c.fileid | c.chunkindex | c.fileseq | c.filesize | UInt64(c.filechunksize) | UInt64(UInt32(bitPattern: c.filedone))
            | UInt64(UInt32(bitPattern: c.fileheld)) | UInt64(UInt32(bitPattern: c.filereceived))
        let hasFileRoom = c.fileroom.map { $0.pointee != 0 } ?? false // protobuf-c's empty string is a pointer to a NUL
        if fileNumbers | UInt64(c.chunk.len | c.filekey.len | c.filedigest.len | c.n_fileranges) != 0 || hasFileRoom {
            decodeFileFields(of: c, into: &message)
        }
        message.receiptIds = try receiptIds(deltas: UnsafeBufferPointer(start: c.receiptids, count: c.n_receiptids))
        return message
    }

    /// The fields of a file transfer (FILE_CHUNK, FILE_ACK, a file's announcement).
    private static func decodeFileFields(of c: Simp__Message, into message: inout SIMPMessage) {
        message.fileId = c.fileid
        message.chunkIndex = c.chunkindex
        message.chunk = byteArray(c.chunk)
        message.fileRanges = c.n_fileranges == 0 ? [] : Array(UnsafeBufferPointer(start: c.fileranges, count: c.n_fileranges))
        message.fileSeq = c.fileseq
        message.fileChunkSize = c.filechunksize
        message.fileDone = c.filedone != 0
        message.fileKey = byteArray(c.filekey)
        message.fileSize = c.filesize
        message.fileDigest = byteArray(c.filedigest)
        message.fileRoom = string(c.fileroom)
        message.fileHeld = c.fileheld != 0
        message.fileReceived = c.filereceived != 0
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

    /// Builds the C struct for `message`. Every string, bytes field and repeated field it points
    /// to is copied into one scratch allocation; fields at their default (empty strings and bytes,
    /// repeated fields without elements) keep what `simp__message__init` set and cost nothing, so
    /// a plain text pays nothing for the fields of files, keys or rooms.
    private static func withCMessage<R>(_ message: SIMPMessage, _ body: (UnsafePointer<Simp__Message>) -> R) -> R {
        let size = CMessageScratch.size(of: message)
        return withUnsafeTemporaryAllocation(byteCount: size.arrays + size.bytes, alignment: 8) { raw in
            var scratch = CMessageScratch(raw.baseAddress!, arrays: size.arrays)
            var c = Simp__Message()
            simp__message__init(&c)
            c.version = message.version
            c.messageid = message.messageId
            c.time = message.time
            c.type = Simp__Message__Type(rawValue: UInt32(bitPattern: message.kind.rawValue))
            c.imagescale = message.imageScale
            c.attempt = message.attempt
            c.holdmicros = message.holdMicros
            c.errorcode = Simp__Message__ErrorCode(rawValue: UInt32(bitPattern: message.errorCode.rawValue))
            c.udpport = message.udpPort
            c.stream = message.stream
            c.seq = message.seq
            c.floor = message.floor
            c.custodyfloor = message.custodyFloor
            c.iterations = message.iterations
            c.sessionid = message.sessionId
            c.retryaftermillis = message.retryAfterMillis
            c.maxdatagramsize = message.maxDatagramSize
            c.status = Simp__Message__DeliveryStatus(rawValue: UInt32(bitPattern: message.status.rawValue))
            c.authormessageid = message.authorMessageId
            c.membercount = message.memberCount
            c.deliveredcount = message.deliveredCount
            c.presence = Simp__Message__Presence(rawValue: message.online ? 1 : 0)
            c.lastseen = message.lastSeen
            c.tokenexpires = message.tokenExpires
            c.sendonly = message.sendOnly ? 1 : 0
            c.hidepresence = message.hidePresence ? 1 : 0
            c.batchreceipts = message.batchReceipts ? 1 : 0
            c.held = message.held ? 1 : 0
            c.messageratelimit = message.messageRateLimit
            c.acceptsbatchreceipts = message.acceptsBatchReceipts ? 1 : 0
            c.receiveronline = message.receiverOnline ? 1 : 0
            c.prekeysleft = message.prekeysLeft
            c.devicesleftout = message.devicesLeftOut
            scratch.string(message.content, into: &c.content)
            scratch.string(message.imageURL, into: &c.imageurl)
            scratch.string(message.fromUser, into: &c.fromuser)
            scratch.string(message.toUser, into: &c.touser)
            scratch.string(message.errorText, into: &c.errortext)
            scratch.string(message.relayId, into: &c.relayid)
            scratch.string(message.room, into: &c.room)
            scratch.string(message.author, into: &c.author)
            scratch.string(message.device, into: &c.device)
            scratch.string(message.loginAddress, into: &c.loginaddress)
            scratch.string(message.token, into: &c.token)
            scratch.bytes(message.nonce, into: &c.nonce)
            scratch.bytes(message.salt, into: &c.salt)
            scratch.bytes(message.proof, into: &c.proof)
            scratch.bytes(message.sessionSecret, into: &c.sessionsecret)
            scratch.bytes(message.datagram, into: &c.datagram)
            scratch.bytes(message.e2ePayload, into: &c.e2epayload)
            scratch.bytes(message.deviceList, into: &c.devicelist)
            if message.directoryProof != DirectoryProof() {
                let proof = message.directoryProof
                scratch.bytes(proof.treeHead, into: &c.treehead)
                scratch.bytes(proof.treeKey, into: &c.treekey)
                scratch.bytes(proof.inclusionProof, into: &c.inclusionproof)
                scratch.bytes(proof.consistencyProof, into: &c.consistencyproof)
                scratch.bytes(proof.directoryCheckpoint, into: &c.directorycheckpoint)
                scratch.bytes(proof.peerConsistencyProof, into: &c.peerconsistencyproof)
                c.logindex = proof.logIndex
                c.knowntreesize = proof.knownTreeSize
                c.peertreesize = proof.peerTreeSize
            }
            if !message.receiptIds.isEmpty {
                var previous: UInt64 = 0
                c.receiptids = scratch.words(message.receiptIds.count) { index in
                    defer { previous = message.receiptIds[index] }
                    return message.receiptIds[index] &- previous
                }
                c.n_receiptids = message.receiptIds.count
            }
            if !message.members.isEmpty {
                c.members = scratch.members(message.members)
                c.n_members = message.members.count
            }
            if !message.keyBundles.isEmpty {
                c.keybundles = scratch.bytesList(message.keyBundles)
                c.n_keybundles = message.keyBundles.count
            }
            if !message.oneTimePrekeys.isEmpty {
                c.onetimeprekeys = scratch.bytesList(message.oneTimePrekeys)
                c.n_onetimeprekeys = message.oneTimePrekeys.count
            }
            if message.hasFileFields { setFileFields(of: message, in: &c, scratch: &scratch) }
            return withUnsafePointer(to: &c) { body($0) }
        }
    }

    /// The fields of a file transfer (FILE_CHUNK, FILE_ACK, a file's announcement).
    private static func setFileFields(of message: SIMPMessage, in c: inout Simp__Message, scratch: inout CMessageScratch) {
        c.fileid = message.fileId
        c.chunkindex = message.chunkIndex
        c.fileseq = message.fileSeq
        c.filechunksize = message.fileChunkSize
        c.filedone = message.fileDone ? 1 : 0
        c.filesize = message.fileSize
        c.fileheld = message.fileHeld ? 1 : 0
        c.filereceived = message.fileReceived ? 1 : 0
        scratch.bytes(message.chunk, into: &c.chunk)
        scratch.bytes(message.fileKey, into: &c.filekey)
        scratch.bytes(message.fileDigest, into: &c.filedigest)
        scratch.string(message.fileRoom, into: &c.fileroom)
        if !message.fileRanges.isEmpty {
            c.fileranges = scratch.words(message.fileRanges.count) { message.fileRanges[$0] }
            c.n_fileranges = message.fileRanges.count
        }
    }
}

extension SIMPMessage {
    /// Whether any field of a file transfer is set (the codec skips them all when none is).
    var hasFileFields: Bool {
        // Bitwise or, not `||`: its autoclosures would each copy the whole message in debug builds.
        let numbers =
            fileId | chunkIndex | fileSeq | fileSize | UInt64(fileChunkSize) | (fileDone ? 1 : 0) | (fileHeld ? 1 : 0)
            | (fileReceived ? 1 : 0)
        let counts = chunk.count | fileKey.count | fileDigest.count | fileRanges.count | fileRoom.utf8.count
        return numbers | UInt64(counts) != 0
    }
}

/// The memory a C message points to, in one allocation: first the 8-byte aligned arrays
/// (repeated integers, string pointers, bytes descriptors), then the bytes of bytes fields and
/// NUL-terminated strings. Each region is bound to one type.
private struct CMessageScratch {
    private let base: UnsafeMutableRawPointer
    /// Where the next array goes (from 0) and where the next bytes go (after the arrays).
    private var arrays = 0, bytes: Int

    init(_ base: UnsafeMutableRawPointer, arrays: Int) {
        self.base = base
        self.bytes = arrays
    }

    /// The bytes `message`'s C struct needs: arrays (a multiple of 8) and bytes (at least 1).
    static func size(of message: SIMPMessage) -> (arrays: Int, bytes: Int) {
        let pointer = MemoryLayout<UnsafeMutablePointer<CChar>?>.stride, binary = MemoryLayout<ProtobufCBinaryData>.stride
        let arrays =
            8 * (message.receiptIds.count + message.fileRanges.count) + pointer * message.members.count
            + binary * (message.keyBundles.count + message.oneTimePrekeys.count)
        // Each string with its NUL (empty ones are not copied; the 1 keeps the size above 0).
        var bytes = 12 + message.content.utf8.count + message.imageURL.utf8.count + message.fromUser.utf8.count
        bytes += message.toUser.utf8.count + message.errorText.utf8.count + message.relayId.utf8.count
        bytes += message.room.utf8.count + message.author.utf8.count + message.device.utf8.count
        bytes += message.loginAddress.utf8.count + message.token.utf8.count
        for member in message.members { bytes += member.utf8.count + 1 }
        bytes += message.nonce.count + message.salt.count + message.proof.count + message.sessionSecret.count
        bytes += message.datagram.count + message.e2ePayload.count + message.chunk.count + message.fileKey.count
        bytes += message.fileDigest.count + message.deviceList.count + message.fileRoom.utf8.count
        bytes += message.directoryProof.byteCount
        for element in message.keyBundles { bytes += element.count }
        for element in message.oneTimePrekeys { bytes += element.count }
        return (arrays, bytes)
    }

    /// Points `field` at a NUL-terminated copy of `string`; leaves it alone when `string` is empty.
    mutating func string(_ string: String, into field: inout UnsafeMutablePointer<CChar>?) {
        guard !string.isEmpty else { return }
        field = copy(string)
    }

    /// Points `field` at a copy of `value`; leaves it alone (length 0) when `value` is empty.
    mutating func bytes(_ value: [UInt8], into field: inout ProtobufCBinaryData) {
        guard !value.isEmpty else { return }
        field = copy(value)
    }

    /// An array of `count` integers, element `index` being `value(index)`.
    mutating func words(_ count: Int, _ value: (Int) -> UInt64) -> UnsafeMutablePointer<UInt64> {
        let words = array(of: UInt64.self, count: count)
        for index in 0..<count { (words + index).initialize(to: value(index)) }
        return words
    }

    /// An array of pointers to NUL-terminated copies of `strings` (empty ones included).
    mutating func members(_ strings: [String]) -> UnsafeMutablePointer<UnsafeMutablePointer<CChar>?> {
        let pointers = array(of: UnsafeMutablePointer<CChar>?.self, count: strings.count)
        for (index, string) in strings.enumerated() { (pointers + index).initialize(to: copy(string)) }
        return pointers
    }

    /// An array of descriptors of copies of `list`'s elements.
    mutating func bytesList(_ list: [[UInt8]]) -> UnsafeMutablePointer<ProtobufCBinaryData> {
        let descriptors = array(of: ProtobufCBinaryData.self, count: list.count)
        for (index, element) in list.enumerated() { (descriptors + index).initialize(to: copy(element)) }
        return descriptors
    }

    private mutating func array<T>(of type: T.Type, count: Int) -> UnsafeMutablePointer<T> {
        defer { arrays += count * MemoryLayout<T>.stride }
        return (base + arrays).bindMemory(to: T.self, capacity: count)
    }

    private mutating func copy(_ string: String) -> UnsafeMutablePointer<CChar> {
        var string = string
        return string.withUTF8 { utf8 in
            let start = (base + bytes).bindMemory(to: CChar.self, capacity: utf8.count + 1)
            if let source = utf8.baseAddress { UnsafeMutableRawPointer(start).copyMemory(from: source, byteCount: utf8.count) }
            start[utf8.count] = 0
            bytes += utf8.count + 1
            return start
        }
    }

    private mutating func copy(_ value: [UInt8]) -> ProtobufCBinaryData {
        guard !value.isEmpty else { return ProtobufCBinaryData(len: 0, data: nil) }
        let start = (base + bytes).bindMemory(to: UInt8.self, capacity: value.count)
        value.withUnsafeBufferPointer { start.initialize(from: $0.baseAddress!, count: $0.count) }
        bytes += value.count
        return ProtobufCBinaryData(len: value.count, data: start)
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
