import NIOCore
import SIMPCore
import XCTest

/// What a sender does with a direct message after asking for its receiver's devices, and when a
/// device publishes again (`KeyWait`, `KeyUpkeep`): never unencrypted, never failed for want of
/// keys while they may still come.
final class KeyWaitTests: XCTestCase {
    private let now = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    func testAMessageIsSealedWhenDevicesAreKnownEvenIfTheRelayCannotAnswerNow() {
        let wait = KeyWait()
        XCTAssertEqual(wait.decide(after: .devices(count: 2), knownDevices: 0, connected: true, now: now), .seal)
        XCTAssertEqual(wait.decide(after: .unavailable, knownDevices: 1, connected: true, now: now), .seal)
        XCTAssertEqual(wait.decide(after: .devices(count: 0), knownDevices: 1, connected: true, now: now), .seal, "the relay lost the bundles")
        XCTAssertEqual(wait.decide(after: .noSuchUser, knownDevices: 0, connected: true, now: now), .sealForNobody)
    }

    func testAFailedFetchIsAskedAgainSoonWhileConnectedAndAtTheNextLoginOtherwise() {
        let wait = KeyWait()
        XCTAssertEqual(wait.decide(after: .unavailable, knownDevices: 0, connected: true, now: now), .holdForRelay(retry: now + wait.retryAfter))
        XCTAssertEqual(wait.decide(after: .unavailable, knownDevices: 0, connected: false, now: now), .holdForRelay(retry: nil))
        var slower = KeyWait()
        slower.retryAfter = .seconds(7)
        XCTAssertEqual(slower.retry(connected: true, now: now), now + .seconds(7), "a restarted session's fetch asks again as a message's")
        XCTAssertNil(slower.retry(connected: false, now: now))
        XCTAssertEqual(slower.decide(after: .unavailable, knownDevices: 0, connected: true, now: now), .holdForRelay(retry: now + .seconds(7)))
        XCTAssertFalse(wait.givesUp(heldAt: now, now: now + .seconds(299), giveUpAfter: .minutes(5)))
        XCTAssertTrue(wait.givesUp(heldAt: now, now: now + .minutes(5), giveUpAfter: .minutes(5)))
    }

    func testOnlyAFetchThatFailedForNowMakesTheMessageWaitForTheRelay() {
        for failure: KeyWait.Failure in [.connectionLost, .timedOut, .refused(.internal), .refused(.rateLimited)] {
            XCTAssertEqual(KeyWait.fetch(after: failure), .unavailable, "\(failure)")
        }
        for code in SIMPMessage.ErrorCode.allCases where code != .internal && code != .rateLimited {
            XCTAssertNil(KeyWait.fetch(after: .refused(code)), "\(code) fails the message")
        }
        XCTAssertNil(KeyWait.fetch(after: .other))
    }

    func testAReceiverWithoutKeysIsWaitedForAndAskedAgainWithinTheRelaysWatchPeriod() {
        let wait = KeyWait()
        XCTAssertEqual(
            wait.decide(after: .devices(count: 0), knownDevices: 0, connected: true, now: now), .waitForFirstKeys(recheck: now + wait.recheckAfter))
        XCTAssertLessThan(wait.recheckAfter, RelayCore.keyWatchPeriod, "the relay still tells this sender of the receiver's first bundle")
    }

    func testOneTimePrekeysAreToppedUpBelowHalfAndTheSignedPrekeyRotatesAfterItsPeriod() {
        let upkeep = KeyUpkeep(oneTimePrekeys: 20)
        XCTAssertEqual(upkeep.prekeysToAdd(left: 10), 0)
        XCTAssertEqual(upkeep.prekeysToAdd(left: 9), 11)
        XCTAssertEqual(upkeep.prekeysToAdd(left: 0), 20)
        let madeAt: UInt64 = 1_700_000_000_000
        XCTAssertFalse(upkeep.rotatesSignedPrekey(madeAt: nil, now: madeAt))
        XCTAssertFalse(upkeep.rotatesSignedPrekey(madeAt: madeAt, now: madeAt + upkeep.signedPrekeyPeriodMillis - 1))
        XCTAssertTrue(upkeep.rotatesSignedPrekey(madeAt: madeAt, now: madeAt + upkeep.signedPrekeyPeriodMillis))
    }
}
