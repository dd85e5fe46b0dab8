import Foundation
import NIOCore
import SIMPLab
import XCTest

/// The link settings of restrictive networks: a network that blocks UDP (from the start, or from a time) or
/// throttles it, while TCP passes; in scenario JSON and from `simp-lab replay --udp-*`.
final class UDPFilterTests: XCTestCase {
    private func link(_ filter: LinkConditions.UDPFilter, seed: UInt64 = 7) -> ImpairedLink<Int> {
        var conditions = LinkConditions()
        conditions.udp = filter
        return ImpairedLink(conditions: conditions, random: SeededRandom(seed: seed))
    }

    func testBlockedFromTheStartDropsEveryDatagramAndNoSegment() {
        var blocked = link(.init(blocked: true))
        let before = blocked.send(1, at: .hours(-1)) // before the workload: the clients connecting
        let during = (0..<1000).flatMap { blocked.send($0, at: .milliseconds(Int64($0))) }
        XCTAssertEqual(before.count + during.count, 0)
        XCTAssertEqual(blocked.statistics.udpBlocked, 1001)
        let segments = (0..<1000).compactMap { blocked.segment(at: .milliseconds(Int64($0))) }
        XCTAssertEqual(segments.count, 1000, "TCP passes")
    }

    func testBlockedFromATimeDropsOnlyFromThen() {
        var midway = link(.init(blockedAtMs: 5000))
        XCTAssertEqual(midway.send(1, at: .hours(-1)).count, 1)
        XCTAssertEqual(midway.send(2, at: .milliseconds(4999)).count, 1)
        XCTAssertEqual(midway.send(3, at: .milliseconds(5000)).count, 0)
        XCTAssertEqual(midway.send(4, at: .seconds(60)).count, 0)
        XCTAssertNotNil(midway.segment(at: .seconds(60)), "TCP passes")
        XCTAssertEqual(midway.statistics.udpBlocked, 2)
    }

    func testThrottledLosesItsShareOfDatagramsAndNoSegment() {
        var throttled = link(.init(lossPercent: 75))
        let delivered = (0..<20_000).flatMap { throttled.send($0, at: .milliseconds(Int64($0))) }.count
        XCTAssertEqual(Double(delivered) / 20_000, 0.25, accuracy: 0.01)
        XCTAssertEqual(throttled.statistics.udpThrottled, 20_000 - delivered)
        let segments = (0..<1000).compactMap { throttled.segment(at: .milliseconds(Int64($0))) }
        XCTAssertEqual(segments.count, 1000, "TCP passes")
    }

    func testScenarioJSONReadsTheFilterStrictly() throws {
        let scenario = try Suite.decode(#"{"name": "x", "senderLink": {"delayMs": 5, "udp": {"blockedAtMs": 5000, "lossPercent": 10}}}"#)
        XCTAssertEqual(scenario.senderAccess.up.udp, .init(blockedAtMs: 5000, lossPercent: 10))
        XCTAssertEqual(scenario.senderAccess.down.udp, .init(blockedAtMs: 5000, lossPercent: 10))
        XCTAssertNil(scenario.receiverAccess.up.udp)
        for (json, expected) in [
            (#"{"name": "x", "link": {"udp": {"blocked": true, "blockedAtMs": 5}}}"#, "give blocked (from the start) or blockedAtMs"),
            (#"{"name": "x", "link": {"udp": {"lossPercent": 101}}}"#, "link.udp.lossPercent: 101 is not allowed"),
            (#"{"name": "x", "link": {"udp": {"blockedAt": 5}}}"#, "link.udp.blockedAt: unknown key"),
        ] {
            let message = try loadError(json)
            XCTAssertTrue(message.contains(expected), message)
        }
    }

    func testCommandLineSettingGoesOnTheChosenLinksOverTheScenarios() throws {
        let scenario = try Suite.decode(
            #"{"name": "x", "link": {"lossPercent": 5}, "receiverDevices": [{"name": "phone"}, {"name": "laptop", "link": {"delayMs": 9}}]}"#)
        let receiverBlocked = UDPOverride(blocked: .receiver, blockedAtMs: 5000).applied(to: scenario)
        XCTAssertNil(receiverBlocked.senderAccess.up.udp)
        XCTAssertEqual(receiverBlocked.receiverAccess.up.udp, .init(blockedAtMs: 5000))
        XCTAssertEqual(receiverBlocked.receiverAccess.down.udp, .init(blockedAtMs: 5000))
        XCTAssertEqual(receiverBlocked.receiverAccess.up.lossPercent, 5, "the scenario's own conditions stay")
        XCTAssertEqual(receiverBlocked.receiverDevices?[1].link?.down.udp, .init(blockedAtMs: 5000), "a device's own link too")
        XCTAssertNil(receiverBlocked.receiverDevices?[0].link, "a device on the receivers' link follows it")

        let both = UDPOverride(blocked: .sender, throttled: .both, throttledPercent: 80).applied(to: scenario)
        XCTAssertEqual(both.senderAccess.down.udp, .init(blocked: true, lossPercent: 80))
        XCTAssertEqual(both.receiverAccess.up.udp, .init(lossPercent: 80))
        XCTAssertEqual(UDPOverride().applied(to: scenario), scenario)
    }

    /// Without the fallback to the control connection, a blocked sender's messages all fail (the diagnosis the
    /// issue reports); the TCP control channel stays up throughout. The suite's udp-* bars
    /// hold once datagrams travel over the control channel (`KnownBugs.udpHasNoFallback`).
    func testTheSuiteHasTheUDPScenariosAndTheyRunAndReport() throws {
        for name in ["udp-blocked", "udp-blocked-receiver", "udp-blocked-midway", "udp-throttled"] {
            let scenario = try Suite.scenario(name)
            XCTAssertEqual(scenario.expect.noFailures, true, name)
            var short = scenario
            short.workload.messages = 20
            let report = Simulation.run(short, seed: 1)
            XCTAssertEqual(report.sent, 20, name)
            XCTAssertEqual(report.duplicates, 0, name)
            KnownBugs.assertBars(report)
        }
    }

    /// The report counts the clients' path switches (moves to the control connection and back):
    /// the measure of flapping for a switching rule. UDP blocked 5 s in moves the clients to the
    /// control connection; the same stream ending before then moves nobody.
    func testTheReportCountsPathSwitches() throws {
        var midway = try Suite.scenario("udp-blocked-midway")
        midway.workload.messages = 300 // 6 s
        let blocked = Simulation.run(midway, seed: 1)
        XCTAssertGreaterThanOrEqual(blocked.pathSwitches, 2, "at least the sender and the receiver, once each")
        XCTAssertTrue(ReportTable.detailed(blocked).contains("path_switches"))
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(blocked.json().utf8)) as? [String: Any])
        XCTAssertEqual(object["path_switches"] as? Int, blocked.pathSwitches)
        midway.workload.messages = 100 // 2 s: over before UDP stops
        XCTAssertEqual(Simulation.run(midway, seed: 1).pathSwitches, 0)
    }

    /// Only the client whose UDP fails moves. The receiver in `udp-blocked` sees every message
    /// its sender resent at its switch (all retransmissions), and `burst-loss` fills 14 of a
    /// client's latest 20 outcomes now and then; the heavy-loss rule's loss check (PROTOCOL §5.5
    /// rule 3) finds their own HELLOs answered. Without the check (seed 1): 3, 3 and 5 switches.
    func testAClientWhoseOwnUDPWorksStaysOnItWhateverItsRetransmissionsSay() throws {
        for name in ["udp-blocked", "udp-blocked-receiver"] {
            XCTAssertEqual(Simulation.run(try Suite.scenario(name), seed: 1).pathSwitches, 1, "\(name): the blocked client, once")
        }
        XCTAssertEqual(Simulation.run(try Suite.scenario("burst-loss"), seed: 1).pathSwitches, 0, "burst-loss: nobody")
    }
}
