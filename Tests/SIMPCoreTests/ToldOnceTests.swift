import SIMPCore
import XCTest

/// Notices said once per process (`ToldOnce`): each subject once, subjects that name the same
/// user and device never silence each other, and a settled one may be said again.
final class ToldOnceTests: XCTestCase {
    func testEachSubjectIsToldOnce() {
        var told = ToldOnce()
        XCTAssertFalse(told.wasTold(.unusableKeys(user: "bob", device: "phone")))
        XCTAssertTrue(told.shouldTell(.unusableKeys(user: "bob", device: "phone")))
        XCTAssertFalse(told.shouldTell(.unusableKeys(user: "bob", device: "phone")))
        XCTAssertTrue(told.wasTold(.unusableKeys(user: "bob", device: "phone")))
        XCTAssertTrue(told.shouldTell(.unusableKeys(user: "bob", device: "laptop")), "another device")
        XCTAssertTrue(told.shouldTell(.ownUserKeyReplaced))
        XCTAssertFalse(told.shouldTell(.ownUserKeyReplaced))
    }

    func testSubjectsNamingTheSameUserOrDeviceAreApart() {
        var told = ToldOnce()
        let subjects: [ToldOnce.Subject] = [
            .unusableKeys(user: "bob", device: ""), .devicesLeftOut(user: "bob"), .deviceListWithdrawn(user: "bob"),
            .unapprovedDevice(user: "bob", device: "phone"), .ownDeviceNotApproved(device: "phone"), .unusableKeys(user: "bob", device: "phone"),
            .directoryRefused(user: "bob", problem: "forked"), .directoryRefused(user: "bob", problem: "stale"), .directoryForked(user: "bob"),
            .noUsableKeys(user: "bob", room: "ops"), .noUsableKeys(user: "bob", room: "dev"), .verificationLapsed(user: "bob"),
            .unusableKeys(user: "bob/phone", device: ""), .unusableKeys(user: "bob", device: "/phone"),
        ]
        for subject in subjects { XCTAssertTrue(told.shouldTell(subject), "\(subject)") }
        for subject in subjects { XCTAssertFalse(told.shouldTell(subject), "\(subject)") }
    }

    func testASettledSubjectMayBeToldAgain() {
        var told = ToldOnce()
        XCTAssertTrue(told.shouldTell(.verificationLapsed(user: "bob")))
        XCTAssertTrue(told.shouldTell(.verificationLapsed(user: "carol")))
        told.forget(.verificationLapsed(user: "bob"))
        XCTAssertFalse(told.wasTold(.verificationLapsed(user: "bob")))
        XCTAssertTrue(told.shouldTell(.verificationLapsed(user: "bob")))
        XCTAssertFalse(told.shouldTell(.verificationLapsed(user: "carol")), "only the one settled")
    }
}
