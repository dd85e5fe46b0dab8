import Foundation
import SIMPClient
import XCTest

/// What a received file is saved as: a plain name inside the downloads folder, never over another file.
final class FileNamesTests: XCTestCase {
    func testNamesAreSanitisedToOnePlainComponent() {
        XCTAssertEqual(FileDownloads.sanitised("../../etc/x"), "x")
        XCTAssertEqual(FileDownloads.sanitised("..\\..\\windows\\evil.exe"), "evil.exe")
        XCTAssertEqual(FileDownloads.sanitised(".."), "file")
        XCTAssertEqual(FileDownloads.sanitised("a..b"), "a.b")
        XCTAssertEqual(FileDownloads.sanitised(".bashrc"), "bashrc")
        XCTAssertEqual(FileDownloads.sanitised("re\u{1b}[31mport\u{7}.pdf"), "re[31mport.pdf")
        XCTAssertEqual(FileDownloads.sanitised("line\nbreak"), "linebreak")
        XCTAssertEqual(FileDownloads.sanitised(""), "file")
        XCTAssertEqual(FileDownloads.sanitised(String(repeating: "é", count: 300)).utf8.count, 200)
    }
}
