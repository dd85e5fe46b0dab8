import Foundation
import SIMPBench
import XCTest

/// `simp-bench seal` measures every seal on datagrams that really go through open and seal
/// (figures are reported, never asserted).
final class SealBenchTests: XCTestCase {
    func testEverySealIsMeasuredAndReported() throws {
        let report = try SealBench.run(payloadSize: 200, datagrams: 50, rounds: 2)

        XCTAssertEqual(
            report.rows.map(\.seal),
            [
                "hmac-sha256 (previous seal, 0xA1)", "aes-256-gcm, swift-crypto one-shot (until now)",
                "aes-256-gcm, key per session (in use, 0xA2)", "aes-256-gcm, key per session, open in place",
                "chacha20-poly1305 (alternative)",
            ])
        XCTAssertEqual(report.payloadSize, 200)
        XCTAssertTrue(report.rows.allSatisfy { $0.bestNanoseconds > 0 && $0.bestNanoseconds <= $0.medianNanoseconds })
        XCTAssertTrue(report.rows.allSatisfy { $0.allocations == nil }, "no counter given")
        let json = try JSONSerialization.jsonObject(with: Data(report.json().utf8)) as? [String: Any]
        XCTAssertEqual((json?["rows"] as? [Any])?.count, 5)
        XCTAssertTrue(report.table().contains("aes-256-gcm, key per session (in use, 0xA2)"))
    }
}
