import SIMPCore
import SIMPE2E
import XCTest

/// What a device does with its own user's KEYS_FETCH answer (`OwnDeviceListCheck`, docs/E2E.md
/// §3.4): publish its list again when the relay lacks it, never over another key's list, make the
/// user key only as the user's only device, and what the user is told.
final class OwnDeviceListCheckTests: XCTestCase {
    private func identity(_ seed: UInt64) -> IdentityKey { SeededKeys.identity(seed) }

    private func key(_ seed: UInt64) -> UserSigningKey { SeededKeys.userKey(seed) }

    private func list(_ devices: [String: UInt64], by signer: UInt64, counter: UInt64 = 1) throws -> SignedDeviceList {
        let approved = devices.map { ApprovedDevice(device: $0.key, identity: identity($0.value)) }
        return try SignedDeviceList.signed(user: "alice", counter: counter, devices: approved, by: key(signer))
    }

    func testTheDeviceHoldingTheKeyPublishesItsListAgainWhenTheRelayLacksItOrServesAnOlderOne() throws {
        let own = try list(["desk": 1, "phone": 2], by: 9, counter: 2)
        let older = try list(["desk": 1], by: 9, counter: 1)
        for served in [[], older.encoded] {
            let check = OwnDeviceListCheck.check(
                served: served, listedDevices: ["desk", "phone"], own: own, device: "desk", identity: identity(1), makesUserKey: true)
            XCTAssertEqual(check, OwnDeviceListCheck(step: .republish(own)))
        }
        let same = OwnDeviceListCheck.check(
            served: own.encoded, listedDevices: ["desk", "phone"], own: own, device: "desk", identity: identity(1), makesUserKey: true)
        XCTAssertEqual(same, OwnDeviceListCheck(step: .none), "served as signed: nothing to send or say")
    }

    func testAListOfAnotherKeyIsToldAndNotPublishedOver() throws {
        let own = try list(["desk": 1], by: 9)
        let other = try list(["desk": 1], by: 10)
        let check = OwnDeviceListCheck.check(
            served: other.encoded, listedDevices: ["desk"], own: own, device: "desk", identity: identity(1), makesUserKey: true)
        XCTAssertEqual(check, OwnDeviceListCheck(step: .none, findings: [.userKeyReplaced]))
    }

    func testDevicesOutsideTheOwnListAreToldBeforeAnythingElse() throws {
        let own = try list(["desk": 1], by: 9)
        let other = try list(["desk": 1], by: 10)
        let check = OwnDeviceListCheck.check(
            served: other.encoded, listedDevices: ["desk", "tablet", "phone"], own: own, device: "desk", identity: identity(1),
            makesUserKey: true)
        XCTAssertEqual(check.findings, [.otherDeviceNotApproved(device: "tablet"), .otherDeviceNotApproved(device: "phone"), .userKeyReplaced])
        let republished = OwnDeviceListCheck.check(
            served: [], listedDevices: ["desk", "tablet"], own: own, device: "desk", identity: identity(1), makesUserKey: true)
        XCTAssertEqual(republished, OwnDeviceListCheck(step: .republish(own), findings: [.otherDeviceNotApproved(device: "tablet")]))
    }

    func testOnlyTheUsersOnlyUnapprovedDeviceMakesTheUserKeyAndOnlyWhenAllowed() throws {
        let check = { (served: [UInt8], listed: [String], makes: Bool) in
            OwnDeviceListCheck.check(served: served, listedDevices: listed, own: nil, device: "desk", identity: self.identity(1), makesUserKey: makes)
        }
        XCTAssertEqual(check([], ["desk"], true), OwnDeviceListCheck(step: .makeUserKey), "the first device")
        XCTAssertEqual(check([], ["desk"], false), OwnDeviceListCheck(step: .none), "not allowed (simp keys): nothing, nothing told")
        XCTAssertEqual(check([], ["desk", "phone"], true), OwnDeviceListCheck(step: .none), "another device may hold the key")
        let lost = try list(["old": 5], by: 9) // the list of a key lost with every device
        XCTAssertEqual(check(lost.encoded, ["desk"], true), OwnDeviceListCheck(step: .makeUserKey), "reinstalled after every device was lost")
        XCTAssertEqual(
            check(lost.encoded, ["desk", "phone"], true), OwnDeviceListCheck(step: .none, findings: [.thisDeviceNotApproved]))
        let approving = try list(["desk": 1, "phone": 2], by: 9)
        XCTAssertEqual(check(approving.encoded, ["desk"], true), OwnDeviceListCheck(step: .none), "approved: nothing")
        let otherIdentity = try list(["desk": 3], by: 9)
        XCTAssertEqual(
            check(otherIdentity.encoded, ["desk", "phone"], true), OwnDeviceListCheck(step: .none, findings: [.thisDeviceNotApproved]),
            "approved with another identity is not approved")
        XCTAssertEqual(check([7, 7, 7], ["desk", "phone"], true), OwnDeviceListCheck(step: .none), "an undecodable list tells nothing")
    }
}
