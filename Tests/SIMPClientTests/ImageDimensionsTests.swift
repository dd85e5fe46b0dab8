import Foundation
import SIMPClient
import XCTest

/// The width×height `simp chat` shows for an image, read from the PNG, JPEG or GIF header.
final class ImageDimensionsTests: XCTestCase {
    func testPNGGivesTheIHDRWidthAndHeight() {
        let png: [UInt8] =
            [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13] + Array("IHDR".utf8) + [0, 0, 0x05, 0x00, 0, 0, 0x02, 0xD0, 8, 6, 0, 0, 0]
        XCTAssertEqual(ImageDimensions(header: png), ImageDimensions(format: "PNG", width: 1280, height: 720))
        XCTAssertEqual(ImageDimensions(header: png)?.description, "1280×720")
        XCTAssertNil(ImageDimensions(header: Array(png.prefix(20))), "cut short")
    }

    func testGIFGivesTheScreenSizeLittleEndian() {
        let gif = Array("GIF89a".utf8) + [0x40, 0x01, 0xF0, 0x00, 0, 0, 0]
        XCTAssertEqual(ImageDimensions(header: gif), ImageDimensions(format: "GIF", width: 320, height: 240))
        XCTAssertNil(ImageDimensions(header: Array("GIF90a".utf8) + [1, 0, 1, 0]))
    }

    func testJPEGSkipsSegmentsUpToTheStartOfFrame() {
        // SOI, an APP0 of 16 bytes, a DHT (0xC4: not a frame) of 4 bytes, fill bytes, then SOF2 (progressive).
        var jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10] + Array(repeating: 0, count: 14)
        jpeg += [0xFF, 0xC4, 0x00, 0x04, 0x00, 0x00]
        jpeg += [0xFF, 0xFF, 0xC2, 0x00, 0x11, 0x08, 0x01, 0xE0, 0x02, 0x80, 0x03]
        XCTAssertEqual(ImageDimensions(header: jpeg), ImageDimensions(format: "JPEG", width: 640, height: 480))
        XCTAssertNil(ImageDimensions(header: Array(jpeg.prefix(jpeg.count - 6))), "the frame header cut off")
        XCTAssertNil(ImageDimensions(header: [0xFF, 0xD8, 0x00, 0x00, 0x00]), "not a segment")
    }

    func testOtherFilesHaveNoDimensions() {
        XCTAssertNil(ImageDimensions(header: Array("%PDF-1.7\n".utf8)))
        XCTAssertNil(ImageDimensions(header: []))
    }

    func testSizesAreShownInDecimalUnits() {
        XCTAssertEqual(ByteCount.text(532), "532 bytes")
        XCTAssertEqual(ByteCount.text(12_345), "12.3 kB")
        XCTAssertEqual(ByteCount.text(1_526_400), "1.5 MB")
        XCTAssertEqual(ByteCount.text(999_999), "1.0 MB")
        XCTAssertEqual(ByteCount.text(4_200_000_000), "4.2 GB")
    }
}
