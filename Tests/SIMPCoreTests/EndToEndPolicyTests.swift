import NIOCore
import SIMPCore
import XCTest

/// A sender's end-to-end decisions without a shell: device-list freshness, what happens to a
/// message after the relay answered, the plaintext fallback (only by the user's choice) and
/// the recovery-session limit, each asserted as the whole decision.
final class EndToEndPolicyTests: XCTestCase {
    private let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func testADeviceListIsFetchedWhenUnknownOrOldAndAgainAfterAnEmptyAnswer() {
        var policy = EndToEndPolicy()
        XCTAssertTrue(policy.needsDevices(of: "bob", now: start), "never fetched")
        policy.devicesAnswered(of: "bob", bundles: 2, now: start)
        XCTAssertFalse(policy.needsDevices(of: "bob", now: start + .minutes(4)), "fresh for five minutes")
        XCTAssertTrue(policy.needsDevices(of: "bob", now: start + .minutes(5)))
        XCTAssertEqual(policy.fetchedAt, ["bob": start])

        policy.devicesChanged(of: "bob") // the relay told of a new bundle
        XCTAssertTrue(policy.needsDevices(of: "bob", now: start + .seconds(1)))
        XCTAssertEqual(policy.fetchedAt, [:])

        // The relay lost bob's bundles: the two devices known here are kept, asked again next time.
        XCTAssertFalse(policy.replacesDevices(bundles: 0, knownDevices: 2))
        policy.devicesAnswered(of: "bob", bundles: 0, now: start)
        XCTAssertTrue(policy.needsDevices(of: "bob", now: start))
        // Nobody known and nothing answered: the (empty) list is taken; a new list always is.
        XCTAssertTrue(policy.replacesDevices(bundles: 0, knownDevices: 0))
        XCTAssertTrue(policy.replacesDevices(bundles: 1, knownDevices: 3))
        policy.devicesAnswered(of: "erin", bundles: 0, now: start)
        XCTAssertEqual(policy.fetchedAt, [:])
    }

    func testWhatHappensToAMessageAfterTheRelayAnswered() {
        var policy = EndToEndPolicy()
        let now = start
        XCTAssertEqual(policy.seal(to: "bob", after: .devices(count: 1), knownDevices: 1, connected: true, now: now), .keyWait(.seal))
        XCTAssertEqual(policy.seal(to: "bob", after: nil, knownDevices: 1, connected: true, now: now), .keyWait(.seal), "a fresh list")
        XCTAssertEqual(
            policy.seal(to: "erin", after: .devices(count: 0), knownDevices: 0, connected: true, now: now),
            .keyWait(.waitForFirstKeys(recheck: now + .minutes(4))), "never logged in: waits, never plaintext")
        XCTAssertEqual(
            policy.seal(to: "bob", after: .unavailable, knownDevices: 0, connected: true, now: now),
            .keyWait(.holdForRelay(retry: now + .seconds(2))))
        XCTAssertEqual(
            policy.seal(to: "bob", after: .unavailable, knownDevices: 0, connected: false, now: now), .keyWait(.holdForRelay(retry: nil)))
        XCTAssertEqual(policy.seal(to: "bob", after: .unavailable, knownDevices: 2, connected: true, now: now), .keyWait(.seal))

        policy.noSuchUser("mallory")
        XCTAssertEqual(policy.unknownUsers, ["mallory"])
        XCTAssertEqual(policy.seal(to: "mallory", after: nil, knownDevices: 0, connected: true, now: now), .keyWait(.sealForNobody))
        XCTAssertEqual(
            policy.seal(to: "mallory", after: .unavailable, knownDevices: 0, connected: true, now: now),
            .keyWait(.holdForRelay(retry: now + .seconds(2))), "the relay could not be asked: not known to be absent now")
        policy.devicesAnswered(of: "mallory", bundles: 1, now: now) // created since
        XCTAssertEqual(policy.unknownUsers, [])
    }

    func testPlaintextOnlyByTheUsersChoice() {
        var strict = EndToEndPolicy()
        XCTAssertFalse(strict.sendsUnencrypted(encryptionFailed: true))
        strict.relayKeepsNoKeys()
        XCTAssertFalse(strict.sendsUnencrypted(encryptionFailed: false))
        XCTAssertFalse(strict.relaySupportsKeys)

        var allowing = EndToEndPolicy(settings: .init(allowUnencrypted: true))
        XCTAssertEqual(allowing.seal(to: "erin", after: .devices(count: 0), knownDevices: 0, connected: true, now: start), .unencrypted)
        XCTAssertEqual(
            allowing.seal(to: "bob", after: .unavailable, knownDevices: 0, connected: true, now: start),
            .keyWait(.holdForRelay(retry: start + .seconds(2))), "an unreachable relay is no reason to send in the clear")
        XCTAssertTrue(allowing.sendsUnencrypted(encryptionFailed: true))
        XCTAssertFalse(allowing.sendsUnencrypted(encryptionFailed: false), "the relay keeps keys: the failure is not about encryption")
        allowing.relayKeepsNoKeys()
        XCTAssertTrue(allowing.sendsUnencrypted(encryptionFailed: false))

        XCTAssertFalse(strict.postsUnencrypted(keylessMembers: 2), "a room member without keys is left out, the post sealed")
        XCTAssertFalse(allowing.postsUnencrypted(keylessMembers: 0), "every member has keys: sealed whatever the user allowed")
        XCTAssertTrue(allowing.postsUnencrypted(keylessMembers: 1))
    }

    func testAtMostOneRecoverySessionPerDeviceAMinuteUnlessTheSessionIsACopy() {
        var policy = EndToEndPolicy()
        let asks: [(device: String, copy: Bool, after: TimeAmount)] = [
            ("phone", false, .zero), ("phone", false, .seconds(30)), ("laptop", false, .seconds(30)),
            ("phone", true, .seconds(40)), ("phone", false, .seconds(80)), ("phone", false, .seconds(100)),
        ]
        let starts = asks.map { policy.startsRecoverySession(with: "bob", device: $0.device, sessionIsCopy: $0.copy, now: start + $0.after) }
        XCTAssertEqual(starts, [true, false, true, true, false, true])
        XCTAssertEqual(policy.recoveryStarts, ["bob/phone": start + .seconds(100), "bob/laptop": start + .seconds(30)])
    }
}
