import Foundation
import SIMPCore
import XCTest

@testable import SIMPE2E

/// What docs/PROTOCOL.md (field 61, §4.8) and docs/E2E.md (§3.1, §3.2) say about key bundles
/// must be what the code does: the sizes of a published bundle are those of real bundles
/// encoded here, the relay accepts exactly those, and the byte-by-byte recipe for rebuilding a
/// fetched bundle, followed with the numbers the documents give, makes the code's bundle.
final class DocumentedBundleTests: XCTestCase {
    /// Bob's device, with one one-time prekey, without and with a KEM prekey.
    private func bundles() throws -> (plain: KeyBundle, withKEM: KeyBundle) {
        var random = SeededRandom(seed: 11)
        let identity = DeviceIdentity(using: &random)
        var prekeys = DevicePrekeys(identity: identity, using: &random)
        let oneTime = prekeys.makeOneTimePrekeys(1, using: &random)
        let plain = prekeys.bundle(identity: identity, oneTimePrekeys: oneTime)
        prekeys.makeKEMPrekey(identity: identity, using: &random)
        return (plain, prekeys.bundle(identity: identity, oneTimePrekeys: oneTime))
    }

    func testThePublishedSizesTheDocumentsGiveAreThoseOfRealBundlesAndTheRelaysLimits() throws {
        let (plain, withKEM) = try bundles()
        let published = [plain.withoutOneTimePrekeys.encoded.count, withKEM.withoutOneTimePrekeys.encoded.count]
        XCTAssertEqual(RelayCore.publishedKeyBundleSizes, Set(published))
        let kemSize = published[1] - published[0]
        let prekeySize = plain.encoded.count - published[0]

        let protocolText = try documentText("docs/PROTOCOL.md")
        let field61 = try XCTUnwrap(protocolText.split(separator: "\n").first { $0.hasPrefix("| 61 | `keyBundles`") })
        XCTAssertEqual(numbers(in: String(field61), #"(\d[\d,]*) bytes, (\d[\d,]*) with an ML-KEM prekey"#), published, "PROTOCOL field 61")
        XCTAssertEqual(numbers(in: protocolText, #"that is (\d[\d,]*) or (\d[\d,]*) bytes"#), published, "PROTOCOL §4.8 publishing")

        let e2e = try documentText("docs/E2E.md")
        XCTAssertEqual(
            numbers(in: e2e, #"Size: (\d[\d,]*) \+ (\d+)·`n` bytes, plus (\d[\d,]*) with a KEM prekey"#), [published[0], prekeySize, kemSize],
            "E2E §3.1")
        XCTAssertEqual(numbers(in: e2e, #"with `n` = 0 \((\d[\d,]*) bytes, (\d[\d,]*) with a KEM prekey\)"#), published, "E2E §3.2")
        XCTAssertEqual(numbers(in: e2e, #"\| 0 or (\d[\d,]*) \| optional KEM prekey"#), [kemSize], "E2E §3.1 table")
    }

    /// The fetch answer carries the published bundle and the claimed prekey apart; the recipe of
    /// PROTOCOL §4.8 and E2E §3.2 (bytes 0–164, the count 1, the prekey, the rest from 167 on)
    /// must give the bundle the code starts sessions from, with and without a KEM prekey.
    func testTheDocumentedRecipeRebuildsTheBundleTheCodeUses() throws {
        let protocolText = try documentText("docs/PROTOCOL.md")
        let e2e = try documentText("docs/E2E.md")
        let fixedEnd = try XCTUnwrap(numbers(in: protocolText, #"otherwise its bytes 0–(\d+)"#).first)
        let restFrom = try XCTUnwrap(numbers(in: protocolText, #"bundle's bytes from (\d+) on"#).first)
        XCTAssertEqual(numbers(in: e2e, #"bytes 0–(\d+) of the published\s+bundle"#), [fixedEnd], "E2E §3.2 says what PROTOCOL §4.8 says")
        XCTAssertEqual(numbers(in: e2e, #"bundle's bytes from (\d+) on"#), [restFrom], "E2E §3.2 says what PROTOCOL §4.8 says")

        for bundle in [try bundles().plain, try bundles().withKEM] {
            let published = bundle.withoutOneTimePrekeys.encoded
            let prekey = try XCTUnwrap(bundle.oneTimePrekeys.first).encoded
            let rebuilt = Array(published[0...fixedEnd]) + [0x00, 0x01] + prekey + Array(published[restFrom...])
            XCTAssertEqual(rebuilt, bundle.encoded)
            XCTAssertEqual(try KeyBundle(encoded: rebuilt), bundle.withoutOneTimePrekeys.with(oneTimePrekey: bundle.oneTimePrekeys.first))
            XCTAssertTrue(RelayCore.isPublishableKeyBundle(published))
            XCTAssertFalse(RelayCore.isPublishableKeyBundle(Array(published.prefix(fixedEnd + 1))), "the fixed part alone is not a bundle")
            XCTAssertThrowsError(try KeyBundle(encoded: Array(published.prefix(fixedEnd + 1))))
        }
    }

    /// The integers `pattern`'s groups match in `text` (first match; "1,419" reads as 1419).
    private func numbers(in text: String, _ pattern: String) -> [Int] {
        guard let regex = try? NSRegularExpression(pattern: pattern),
            let match = regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text))
        else { return [] }
        return (1..<match.numberOfRanges).compactMap { index in
            Range(match.range(at: index), in: text).flatMap { Int(text[$0].replacingOccurrences(of: ",", with: "")) }
        }
    }
}
