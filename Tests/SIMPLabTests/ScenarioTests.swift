import Foundation
import NIOCore
import SIMPCore
import SIMPLab
import XCTest

final class ScenarioTests: XCTestCase {
    func testMinimalScenarioGetsDefaults() throws {
        let scenario = try Suite.decode(#"{"name": "tiny"}"#)
        XCTAssertEqual(scenario.seed, 1)
        XCTAssertEqual(scenario.workload.senders, 1)
        XCTAssertEqual(scenario.workload.messages, 100)
        XCTAssertEqual(scenario.workload.interval, .milliseconds(20))
        XCTAssertEqual(scenario.link, AccessLink())
        XCTAssertEqual(scenario.policy, RetransmitPolicy())
    }

    func testOneLinkAppliesToBothDirectionsUpAndDownSplitThem() throws {
        let both = try Suite.decode(#"{"name": "a", "link": {"lossPercent": 5, "delayMs": 30}}"#)
        XCTAssertEqual(both.link.up.lossPercent, 5)
        XCTAssertEqual(both.link.down.delayMs, 30)
        let split = try Suite.decode(#"{"name": "b", "senderLink": {"up": {"lossPercent": 5}}}"#)
        XCTAssertEqual(split.senderAccess.up.lossPercent, 5)
        XCTAssertEqual(split.senderAccess.down, LinkConditions())
        XCTAssertEqual(split.receiverAccess, AccessLink(), "receivers fall back to `link`")
    }

    func testRateIsAnAlternativeToInterval() throws {
        let scenario = try Suite.decode(#"{"name": "r", "workload": {"ratePerSecond": 100}}"#)
        XCTAssertEqual(scenario.workload.interval, .milliseconds(10))
    }

    func testRecoveryTimeCoversBlackoutsAndFaults() throws {
        let scenario = try Suite.decode(
            """
            {"name": "x", "link": {"blackouts": [{"atMs": 1000, "forMs": 5000}]},
             "faults": [{"atMs": 2000, "kind": "restartRelay", "forMs": 7000}]}
            """)
        XCTAssertEqual(scenario.recoversAtMs, 9000)
    }

    func testInvalidScenariosGiveOneLineErrors() {
        XCTAssertThrowsError(try Suite.decode(#"{"workload": {}}"#)) { error in
            XCTAssertTrue("\(error)".contains("name"), "\(error)")
        }
        XCTAssertThrowsError(try Suite.decode(#"{"name": "x", "workload": {"messages": 0}}"#)) { error in
            XCTAssertTrue("\(error)".contains("messages"), "\(error)")
        }
        XCTAssertThrowsError(try Suite.decode(#"{"name": "x", "faults": [{"atMs": 1, "kind": "explode"}]}"#))
        let missing = URL(fileURLWithPath: "/nonexistent/scenario.json")
        XCTAssertThrowsError(try Scenario.load(from: missing)) { error in
            XCTAssertTrue("\(error)".hasPrefix("cannot read"), "\(error)")
        }
    }

    func testSuiteHoldsEveryScenarioTheIssueAsksFor() throws {
        let names = Set(try ScenarioSuite(directory: Suite.directory).entries.map(\.scenario.name))
        let required: Set = [
            "clean", "loss-1", "loss-5", "loss-10", "loss-30", "burst-loss", "duplication", "reordering",
            "jitter", "blackout", "nat-rebinding", "relay-restart", "redis-restart", "kcp-link",
            "two-devices", "device-offline-back", "oneshot-send-mid-offline", "fault-storm",
            "udp-blocked", "udp-blocked-receiver", "udp-blocked-midway", "udp-throttled",
        ]
        XCTAssertEqual(required.subtracting(names), [])
    }

    func testKCPLinkIsKCPsTestLink() throws {
        let kcp = try Suite.scenario("kcp-link")
        XCTAssertGreaterThanOrEqual(kcp.workload.messages, 1000)
        XCTAssertEqual(kcp.workload.interval, .milliseconds(20))
        for direction in [kcp.senderAccess.up, kcp.senderAccess.down] {
            XCTAssertEqual(direction.lossPercent, 5)
            XCTAssertEqual(direction.delayMs, 30)
            XCTAssertEqual(direction.delayMs + direction.jitterMs, 61)
        }
        XCTAssertEqual(kcp.receiverAccess, AccessLink(), "the relay-receiver side is clean")
    }
}
