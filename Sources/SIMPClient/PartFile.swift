import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The `.part` file a download writes its chunks into (`FileDownloads`): each chunk's
/// plaintext at its offset, in whatever order the chunks arrive.
public enum PartFile {
    /// Writes `plaintext` at byte `offset` of `handle`'s file: one positioned write (`pwrite`),
    /// with no seek and no copy into `Data`.
    public static func write(_ plaintext: [UInt8], at offset: UInt64, to handle: FileHandle) throws {
        try plaintext.withUnsafeBytes { bytes in
            var done = 0
            while done < bytes.count {
                let written = pwrite(handle.fileDescriptor, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
                if written < 0 {
                    if errno == EINTR { continue }
                    throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
                }
                done += written
            }
        }
    }
}
