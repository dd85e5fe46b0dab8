import Foundation
import SIMPLab
import XCTest

/// Scenario files are read strictly: a misspelt key or an impossible value is an error that
/// names the file, the key and what is allowed.
final class StrictScenarioTests: XCTestCase {
    func testUnknownTopLevelKeyIsNamedWithTheAllowedOnes() throws {
        let message = try loadError(#"{"name": "x", "senderLnk": {"lossPercent": 5}}"#)
        XCTAssertTrue(message.contains("senderLnk: unknown key"), message)
        XCTAssertTrue(message.contains("did you mean \"senderLink\""), message)
        XCTAssertTrue(message.contains("workload, link, senderLink, receiverLink"), message)
    }

    func testUnknownKeyInsideALinkIsNamedWithItsPath() throws {
        let message = try loadError(#"{"name": "x", "link": {"up": {"lossPercnt": 5}}}"#)
        XCTAssertTrue(message.contains("link.up.lossPercnt: unknown key"), message)
        XCTAssertTrue(message.contains("did you mean \"lossPercent\""), message)
        let mixed = try loadError(#"{"name": "x", "link": {"up": {}, "delayMs": 5}}"#)
        XCTAssertTrue(mixed.contains("link.delayMs: unknown key; allowed here: up, down"), mixed)
    }

    func testOutOfRangeValuesSayWhatIsAllowed() throws {
        let loss = try loadError(#"{"name": "x", "link": {"lossPercent": 150}}"#)
        XCTAssertTrue(loss.contains("link.lossPercent: 150 is not allowed; allowed: 0…100"), loss)
        let delay = try loadError(#"{"name": "x", "receiverLink": {"delayMs": -1}}"#)
        XCTAssertTrue(delay.contains("receiverLink.delayMs: -1 is not allowed; allowed: a number ≥ 0"), delay)
        let senders = try loadError(#"{"name": "x", "workload": {"senders": 0}}"#)
        XCTAssertTrue(senders.contains("workload.senders: 0 is not allowed"), senders)
        let kind = try loadError(#"{"name": "x", "faults": [{"atMs": 1, "kind": "explode"}]}"#)
        XCTAssertTrue(kind.contains("faults[0].kind: \"explode\" is not allowed; allowed: one of closeControl, restartRelay"), kind)
        let burst = try loadError(#"{"name": "x", "link": {"burst": {"enterBadPercent": 1, "leaveBadPercent": 101}}}"#)
        XCTAssertTrue(burst.contains("link.burst.leaveBadPercent: 101"), burst)
    }

    func testEveryNestedObjectIsStrict() throws {
        for (json, key) in [
            (#"{"name": "x", "workload": {"mesages": 5}}"#, "workload.mesages"),
            (#"{"name": "x", "faults": [{"atMs": 1, "kind": "natRebind", "targt": "all"}]}"#, "faults[0].targt"),
            (#"{"name": "x", "expect": {"maxLatency": 5}}"#, "expect.maxLatency"),
            (#"{"name": "x", "retransmit": {"minRTOMs": 5}}"#, "retransmit.minRTOMs"),
            (#"{"name": "x", "link": {"reorder": {"percent": 5, "deep": 2}}}"#, "link.reorder.deep"),
            (#"{"name": "x", "link": {"blackouts": [{"atMs": 5, "forMs": 5, "until": 9}]}}"#, "link.blackouts[0].until"),
        ] {
            let message = try loadError(json)
            XCTAssertTrue(message.contains("\(key): unknown key"), message)
        }
    }

    func testTheSuiteStillLoads() throws {
        XCTAssertGreaterThanOrEqual(try ScenarioSuite(directory: Suite.directory).entries.count, 14)
    }
}
