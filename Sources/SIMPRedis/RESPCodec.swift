import CHiredis
import NIOCore

/// hiredis as the RESP codec: `redisFormatCommandArgv` writes commands, a `redisReader`
/// (`redisReaderCreate`/`Feed`/`GetReply`, hiredis 0.14 API) parses replies. No hiredis
/// socket I/O is used; bytes come and go through a SwiftNIO channel.
enum RESPEncoder {
    /// Appends the RESP form of one command (binary-safe arguments) to `buffer`.
    static func write(_ arguments: [[UInt8]], into buffer: inout ByteBuffer) {
        var formatted: UnsafeMutablePointer<CChar>?
        let length = withRedisArgv(arguments) { argc, argv, lengths in
            redisFormatCommandArgv(&formatted, argc, argv, lengths)
        }
        guard length > 0, let formatted else { fatalError("hiredis could not format a command: out of memory") }
        buffer.writeBytes(UnsafeRawBufferPointer(start: formatted, count: Int(length)))
        redisFreeCommand(formatted)
    }
}

/// What the reader parsed: a reply, or (on a subscribed connection) a published message.
enum RESPFrame {
    case reply(RedisValue)
    /// A `message` (SUBSCRIBE) or `smessage` (SSUBSCRIBE) push, payload binary-safe.
    case message(channel: String, payload: [UInt8])
}

/// hiredis's reply reader for one connection (not thread-safe; owned by its channel handler).
final class RESPReader {
    private let reader: UnsafeMutablePointer<redisReader>

    init() {
        guard let reader = redisReaderCreate() else { fatalError("hiredis could not create a reader: out of memory") }
        self.reader = reader
    }

    deinit { redisReaderFree(reader) }

    /// Hands bytes read from the socket to the parser.
    func feed(_ buffer: ByteBuffer) throws {
        let status = buffer.withUnsafeReadableBytes { bytes in
            redisReaderFeed(reader, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count)
        }
        guard status == REDIS_OK else { throw protocolError() }
    }

    /// The next complete reply, or nil until more bytes arrive. With `pubSub`, `message` and
    /// `smessage` arrays come out as `.message` with the payload's raw bytes.
    func next(pubSub: Bool) throws -> RESPFrame? {
        var raw: UnsafeMutableRawPointer?
        guard redisReaderGetReply(reader, &raw) == REDIS_OK else { throw protocolError() }
        guard let raw else { return nil }
        defer { freeReplyObject(raw) }
        let reply = raw.assumingMemoryBound(to: redisReply.self)
        if pubSub, let message = Self.message(reply.pointee) { return message }
        return .reply(Self.value(of: reply.pointee))
    }

    private func protocolError() -> RedisError {
        let text = withUnsafeBytes(of: reader.pointee.errstr) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
        return RedisError("Redis protocol error: \(text)")
    }

    private static func message(_ reply: redisReply) -> RESPFrame? {
        guard reply.type == REDIS_REPLY_ARRAY, reply.elements == 3 else { return nil }
        let parts = (0..<3).map { reply.element[$0]!.pointee }
        guard parts.allSatisfy({ $0.type == REDIS_REPLY_STRING }) else { return nil }
        let kind = String(decoding: bytes(parts[0]), as: UTF8.self)
        guard kind == "message" || kind == "smessage" else { return nil }
        return .message(channel: String(decoding: bytes(parts[1]), as: UTF8.self), payload: bytes(parts[2]))
    }

    private static func bytes(_ reply: redisReply) -> [UInt8] {
        guard let str = reply.str else { return [] }
        return Array(UnsafeRawBufferPointer(start: str, count: Int(reply.len)))
    }

    static func value(of reply: redisReply) -> RedisValue {
        func text() -> String { String(decoding: bytes(reply), as: UTF8.self) }
        switch reply.type {
        case REDIS_REPLY_STRING:
            let raw = bytes(reply)
            return String(validating: raw, as: UTF8.self).map(RedisValue.string) ?? .bytes(raw)
        case REDIS_REPLY_STATUS: return .status(text())
        case REDIS_REPLY_ERROR: return .error(text())
        case REDIS_REPLY_INTEGER: return .integer(reply.integer)
        case REDIS_REPLY_ARRAY: return .array((0..<Int(reply.elements)).map { value(of: reply.element[$0]!.pointee) })
        default: return .null
        }
    }
}

/// Calls `body` with hiredis's argv form (count, pointers, lengths) of binary-safe arguments.
func withRedisArgv<R>(
    _ arguments: [[UInt8]],
    _ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> R
) -> R {
    var storage = [CChar]()
    var offsets: [Int] = []
    var lengths: [Int] = []
    for argument in arguments {
        offsets.append(storage.count)
        lengths.append(argument.count)
        storage.append(contentsOf: argument.map { CChar(bitPattern: $0) })
        storage.append(0)
    }
    return storage.withUnsafeBufferPointer { chars in
        var argv: [UnsafePointer<CChar>?] = offsets.map { chars.baseAddress! + $0 }
        return argv.withUnsafeMutableBufferPointer { argvBuffer in
            body(Int32(arguments.count), argvBuffer.baseAddress!, lengths)
        }
    }
}
