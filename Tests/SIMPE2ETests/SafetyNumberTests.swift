import SIMPE2E
import XCTest

/// Safety numbers (docs/E2E.md §10).
final class SafetyNumberTests: XCTestCase {
    func testBothSidesComputeTheSameDigitsAndAChangedKeyChangesThem() throws {
        var random = SeededRandom(seed: 5)
        let alice = DeviceIdentity(using: &random).publicKey, bob = DeviceIdentity(using: &random).publicKey
        let seenByAlice = SafetyNumber.compute(localUser: "alice", localIdentity: alice, remoteUser: "bob", remoteIdentity: bob)
        let seenByBob = SafetyNumber.compute(localUser: "bob", localIdentity: bob, remoteUser: "alice", remoteIdentity: alice)
        XCTAssertEqual(seenByAlice, seenByBob)
        XCTAssertEqual(seenByAlice.split(separator: " ").count, 12)
        XCTAssertTrue(seenByAlice.split(separator: " ").allSatisfy { $0.count == 5 && $0.allSatisfy(\.isNumber) })

        let mallory = DeviceIdentity(using: &random).publicKey
        XCTAssertNotEqual(
            SafetyNumber.compute(localUser: "alice", localIdentity: alice, remoteUser: "bob", remoteIdentity: mallory),
            seenByAlice)
        XCTAssertNotEqual(
            SafetyNumber.compute(localUser: "alice", localIdentity: alice, remoteUser: "bobby", remoteIdentity: bob),
            seenByAlice)
    }

    func testADeviceCodeIsTheFirstFifteenDigitsOfItsFingerprintAndIsMatchedWhateverTheSeparators() throws {
        var random = SeededRandom(seed: 9)
        let laptop = DeviceIdentity(using: &random).publicKey, ghost = DeviceIdentity(using: &random).publicKey
        let code = SafetyNumber.deviceCode(user: "bob", identity: laptop)
        let fingerprint = SafetyNumber.fingerprint(user: "bob", identity: laptop)
        XCTAssertEqual(code.filter(\.isNumber), String(fingerprint.prefix(15)))
        XCTAssertEqual(code.split(separator: " ").map(\.count), [5, 5, 5])
        XCTAssertTrue(SafetyNumber.deviceCode(code, matches: code.replacingOccurrences(of: " ", with: "-")))
        XCTAssertTrue(SafetyNumber.deviceCode(code, matches: code.filter(\.isNumber)))
        XCTAssertFalse(SafetyNumber.deviceCode(code, matches: ""))
        XCTAssertFalse(SafetyNumber.deviceCode(code, matches: String(code.dropLast())))
        XCTAssertNotEqual(SafetyNumber.deviceCode(user: "bob", identity: ghost), code, "other keys under the same name")
        XCTAssertNotEqual(SafetyNumber.deviceCode(user: "bobby", identity: laptop), code)
    }
}
