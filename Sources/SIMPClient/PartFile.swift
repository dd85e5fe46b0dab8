import Foundation

/// The `.part` file a download writes its chunks into (`FileDownloads`): each chunk's
/// plaintext at its offset, in whatever order the chunks arrive.
public enum PartFile {
    /// Writes `plaintext` at byte `offset` of `handle`'s file.
    public static func write(_ plaintext: [UInt8], at offset: UInt64, to handle: FileHandle) throws {
        try handle.seek(toOffset: offset)
        try handle.write(contentsOf: plaintext)
    }
}
