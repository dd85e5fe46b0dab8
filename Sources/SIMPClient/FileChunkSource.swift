import Foundation
import SIMPCore

/// The chunks of a file being sent (`FileSend`), as FILE_CHUNK messages: each chunk's
/// plaintext from the part of the file read last (`FileSend.readWindow` bytes at a time, so a
/// file of any size takes about one window of memory), sealed with the file's key
/// (`FileChunkCipher`). What a sender does per chunk, apart from the datagram's own seal:
/// `simp-bench-guard`'s `client.file-chunk-send` counts it.
public struct FileChunkSource {
    /// The transfer's file id and the key its chunks are sealed with (both change when a
    /// forward from the relay's copy fails and the file goes under a new id).
    public var fileId: UInt64
    public var cipher: FileChunkCipher
    /// The user the chunks go to.
    public let peer: String
    /// The file's size in bytes, when the transfer started.
    public let size: UInt64
    /// Chunk plaintext bytes made into messages, retransmissions included.
    public private(set) var bytesSent: UInt64 = 0
    private let file: FileHandle
    /// The part of the file read last: `FileSend.readWindow` bytes from `windowStart`.
    private var window: [UInt8] = []
    private var windowStart: UInt64 = 0

    /// Chunks of `file` (open for reading, `size` bytes) for file `fileId` sealed by `cipher`, to `peer`.
    public init(file: FileHandle, size: UInt64, fileId: UInt64, cipher: FileChunkCipher, peer: String) {
        self.file = file
        self.size = size
        self.fileId = fileId
        self.cipher = cipher
        self.peer = peer
    }

    /// The FILE_CHUNK of `transmission`, sealed with the file's key (the relay fills in the
    /// sender); a FILE_UPLOAD around it if `upload` (the relay holds the file, §5.7).
    public mutating func message(for transmission: FileSender.Transmission, upload: Bool) throws -> SIMPMessage {
        let (offset, length) = try chunk(transmission.chunk)
        bytesSent += UInt64(length)
        // Sealed straight from the window: the plaintext is never copied out of it.
        let sealed = window.withUnsafeBytes { [cipher] in
            cipher.seal(UnsafeRawBufferPointer(rebasing: $0[offset..<offset + length]), index: transmission.chunk)
        }
        let chunk = SIMPMessage.fileChunk(sealed, index: transmission.chunk, number: transmission.number, fileId: fileId, from: "", to: peer)
        return upload ? .fileUpload(chunk, fileSize: size, chunkSize: FileSend.chunkSize) : chunk
    }

    /// Where chunk `index`'s plaintext lies in the window (its offset and length), reading a
    /// new window around it first unless the one read last holds it.
    private mutating func chunk(_ index: UInt64) throws -> (offset: Int, length: Int) {
        let start = index * UInt64(FileSend.chunkSize)
        let length = Int(min(UInt64(FileSend.chunkSize), size - min(start, size)))
        if start < windowStart || start + UInt64(length) > windowStart + UInt64(window.count) {
            windowStart = start - start % UInt64(FileSend.readWindow)
            do {
                try file.seek(toOffset: windowStart)
                window = Array(try file.read(upToCount: FileSend.readWindow) ?? Data())
            } catch {
                throw FileSend.Failure.readFailed(error.localizedDescription)
            }
            guard start + UInt64(length) <= windowStart + UInt64(window.count) else {
                throw FileSend.Failure.readFailed("the file is shorter than when the transfer started (\(size) bytes)")
            }
        }
        return (Int(start - windowStart), length)
    }
}
