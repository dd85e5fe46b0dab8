import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// Posts made while a member's keys were being reset (docs/E2E.md §14.5): bob's device loses
/// its keys while offline, carol posts twice, bob comes back with new keys. He cannot read
/// those two (they are never sent again to a new key), and once his device gives them up,
/// carol is told that bob's device could not read them. Real relay and Redis.
final class RoomPostDuringResetTests: EndToEndRelayTestCase {
    private func post(_ text: String, by client: SIMPClient, to room: String) async throws -> UInt64 {
        guard case .stored(let id, _) = try await client.send(text: text, toRoom: room) else {
            XCTFail("\(text) not posted")
            return 0
        }
        return id
    }

    func testTheAuthorIsToldWhoCouldNotReadPostsMadeDuringAKeyReset() async throws {
        let (carol, bob) = (TestRelay.uniqueUser("carol"), TestRelay.uniqueUser("bob"))
        let room = TestRelay.uniqueUser("ops")
        let author = try await connectEndToEnd(carol, device: "desk")
        let told = EndToEndNoticeLog(author)
        var reader = try await connectEndToEnd(bob, device: "phone")
        var inbox = MessageInbox(reader)
        _ = try await author.joinRoom(room)
        _ = try await reader.joinRoom(room)
        _ = try await post("before the reset", by: author, to: room)
        let first = await inbox.waitFor(1)
        XCTAssertTrue(first)

        await reader.close()
        try FileManager.default.removeItem(at: home.appendingPathComponent("e2e").appendingPathComponent(bob))
        let during = [try await post("during 1", by: author, to: room), try await post("during 2", by: author, to: room)]
        reader = try await connectEndToEnd(bob, device: "phone") // new keys, published
        inbox = MessageInbox(reader)
        // bob's device holds the two copies for their key (60 s), then gives them up at the next
        // room post and asks carol's device about them.
        try await Task.sleep(nanoseconds: 62_000_000_000)
        _ = try await post("after the reset", by: author, to: room)
        for id in during {
            let said = await told.waitFor { $0 == .resent(user: bob, device: "phone", messageId: id, again: false) }
            let notices = await told.notices
            XCTAssertTrue(said, "carol is told bob's device could not read post \(id): \(notices)")
        }
        let read = await inbox.messages.map(\.content)
        XCTAssertFalse(read.contains("during 1") || read.contains("during 2"), "\(read)")
        await reader.close()
        await author.close()
    }
}
