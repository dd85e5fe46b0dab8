import SIMPCore
import XCTest

/// A file chunk's seal (docs/PROTOCOL.md §5.6): AES-256-GCM under the file's key, the nonce
/// `00000000 ‖ index`, the associated data `"simp file v1" ‖ fileId ‖ index`. The expected
/// bytes were computed apart from this code (Python's `cryptography`, AESGCM), so the chunks'
/// wire form cannot change with how the cipher is called.
final class FileChunkCipherTests: XCTestCase {
    private let cipher = FileChunkCipher(key: (0..<32).map { UInt8($0) }, fileId: 0x0102_0304_0506_0708)
    private let plaintext = (0..<40).map { UInt8($0 * 7 % 256) }

    func testAChunkSealsToTheProtocolsBytesAndOpensBack() throws {
        let sealed = cipher.seal(plaintext, index: 300)
        XCTAssertEqual(
            Self.hex(sealed), "cad6ddf1b3deef10199feef6aac8e20ceaa45e70d13fc915bb37f03cb0ab04fed919c0968965730937a7750479d6ce52e6ee35045b719021")
        XCTAssertEqual(try cipher.open(sealed, index: 300), plaintext)
        // Read where it lies (a slice of the sender's window): the same bytes.
        let window = [UInt8](repeating: 9, count: 5) + plaintext + [9]
        XCTAssertEqual(window.withUnsafeBytes { cipher.seal(UnsafeRawBufferPointer(rebasing: $0[5..<45]), index: 300) }, sealed)
    }

    func testAnEmptyChunkIsItsTagAlone() throws {
        let sealed = cipher.seal([], index: 300)
        XCTAssertEqual(Self.hex(sealed), "3a09cc88057ac949e13b51c0beb72482")
        XCTAssertEqual(try cipher.open(sealed, index: 300), [])
    }

    func testAnotherPositionFileOrKeyOrAnAlteredByteDoesNotOpen() {
        let sealed = cipher.seal(plaintext, index: 300)
        XCTAssertThrowsError(try cipher.open(sealed, index: 301))
        XCTAssertThrowsError(try FileChunkCipher(key: (0..<32).map { UInt8($0) }, fileId: 1).open(sealed, index: 300))
        XCTAssertThrowsError(try FileChunkCipher(key: [UInt8](repeating: 0, count: 32), fileId: 0x0102_0304_0506_0708).open(sealed, index: 300))
        var altered = sealed
        altered[3] ^= 1
        XCTAssertThrowsError(try cipher.open(altered, index: 300))
        XCTAssertThrowsError(try cipher.open(Array(sealed.prefix(15)), index: 300), "shorter than a tag")
    }

    private static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
}
