import SIMPCore
import XCTest

/// Where a file goes after its announcement's outcome (docs/PROTOCOL.md §5.6, §5.7): live to a
/// receiver whose one device took it; to the relay when the relay stored it (offline, or several
/// devices), following only the relay's acknowledgements; live to the devices online when the
/// relay will not hold it and some are.
final class FileDestinationTests: XCTestCase {
    private func ack(held: Bool, error: SIMPMessage.ErrorCode? = nil) -> SIMPMessage {
        var ack = SIMPMessage(kind: .fileAck, fromUser: "bob", toUser: "alice")
        ack.fileId = 5
        ack.fileHeld = held
        if let error { ack.errorCode = error }
        return ack
    }

    func testADeliveredAnnouncementGoesLiveAndFollowsTheReceiver() {
        let destination = FileDestination(announcementStored: false, receiverOnline: true)
        XCTAssertEqual(destination, .receiver)
        XCTAssertFalse(destination.uploads)
        XCTAssertTrue(destination.follows(ack(held: false)))
        XCTAssertFalse(destination.follows(ack(held: true)), "the relay's refusal of chunks uploaded before")
        XCTAssertNil(destination.afterRelayRefused)
    }

    func testAStoredAnnouncementUploadsAndFollowsOnlyTheRelay() {
        for online in [false, true] {
            let destination = FileDestination(announcementStored: true, receiverOnline: online)
            XCTAssertEqual(destination, .relay(receiverOnline: online))
            XCTAssertTrue(destination.uploads)
            XCTAssertTrue(destination.follows(ack(held: true)))
            XCTAssertFalse(destination.follows(ack(held: false)), "a device acknowledging chunks the relay passed on")
        }
    }

    func testARefusalToHoldGoesLiveOnlyWhenADeviceIsOnline() {
        XCTAssertEqual(FileDestination.relay(receiverOnline: true).afterRelayRefused, .receiver)
        XCTAssertNil(FileDestination.relay(receiverOnline: false).afterRelayRefused, "nobody to send it to: the transfer fails")
    }
}
