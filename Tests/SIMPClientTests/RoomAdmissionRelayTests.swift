import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// Rooms are the members' (docs/E2E.md §8.4), with a real relay and Redis: carol joins a room
/// alice and bob use, by its name alone; she cannot read the next post, alice is told of her
/// attempt, and once alice admits her she reads alice's next post and, since the admit reached
/// bob end to end, bob's too. alice's mark for the post carol could not read counts bob only.
final class RoomAdmissionRelayTests: EndToEndRelayTestCase {
    private func connect(_ user: String) async throws -> SIMPClient {
        try await connectEndToEnd(user, device: "desk")
    }

    @discardableResult
    private func post(_ text: String, by client: SIMPClient, to room: String) async throws -> UInt64 {
        let result = try await client.send(text: text, toRoom: room)
        guard case .stored(let id, _) = result else {
            XCTFail("\(text): \(result)")
            return 0
        }
        return id
    }

    func testAUserWhoJoinsByNameReadsNothingUntilAMemberAdmitsHer() async throws {
        let (alice, bob, carol) = (TestRelay.uniqueUser("alice"), TestRelay.uniqueUser("bob"), TestRelay.uniqueUser("carol"))
        let room = TestRelay.uniqueUser("ops")
        let (aliceClient, bobClient) = (try await connect(alice), try await connect(bob))
        let aliceNotices = EndToEndNoticeLog(aliceClient), bobNotices = EndToEndNoticeLog(bobClient)
        let aliceMarks = NoticeLog(aliceClient)
        let bobInbox = MessageInbox(bobClient)
        _ = try await aliceClient.joinRoom(room)
        _ = try await bobClient.joinRoom(room)
        try await post("before carol", by: aliceClient, to: room)
        try await post("bob was here first", by: bobClient, to: room)
        let first = await bobInbox.waitFor(1)
        XCTAssertTrue(first)

        let carolClient = try await connect(carol)
        let carolNotices = EndToEndNoticeLog(carolClient)
        let carolInbox = MessageInbox(carolClient)
        _ = try await carolClient.joinRoom(room)
        let unreadable = try await post("carol must not read this", by: aliceClient, to: room)
        let toldAttempt = await aliceNotices.waitFor { $0 == .roomJoinNotAdmitted(user: carol, room: room) }
        let aliceSaw = await aliceNotices.notices
        XCTAssertTrue(toldAttempt, "alice is told carol joined by name: \(aliceSaw)")
        let bobRead = await Eventually.holds { await bobInbox.messages.contains { $0.content == "carol must not read this" } }
        XCTAssertTrue(bobRead, "bob, admitted, reads it")
        // carol's copy arrives and is held for a key that never comes for her.
        try await Task.sleep(nanoseconds: 2_000_000_000)
        var carolRead = await carolInbox.messages.map(\.content)
        XCTAssertFalse(carolRead.contains("carol must not read this"), "\(carolRead)")
        XCTAssertFalse(carolRead.contains("before carol"), "\(carolRead)")
        // Both receipted it; alice's mark counts only bob, who can read it: 1/1, never 2/2.
        let counted = await aliceMarks.waitFor { $0 == .roomProgress(messageId: unreadable, room: room, delivered: 1, of: 1) }
        let marks = await aliceMarks.notices.filter { if case .roomProgress(unreadable, _, _, _) = $0 { true } else { false } }
        XCTAssertTrue(counted, "\(marks)")
        XCTAssertFalse(marks.contains { if case .roomProgress(_, _, _, 2) = $0 { true } else { false } }, "\(marks)")

        try await aliceClient.admit(carol, toRoom: room)
        let bobTaken = await bobNotices.waitFor { $0 == .roomAdmitted(user: carol, room: room, by: alice) }
        let bobSaw = await bobNotices.notices
        XCTAssertTrue(bobTaken, "the admit reaches bob end to end: \(bobSaw)")
        try await post("welcome carol", by: aliceClient, to: room)
        try await post("hello from bob", by: bobClient, to: room)
        let admitted = await Eventually.holds {
            let read = await carolInbox.messages.map(\.content)
            return read.contains("welcome carol") && read.contains("hello from bob")
        }
        carolRead = await carolInbox.messages.map(\.content)
        let carolSaw = await carolNotices.notices
        XCTAssertTrue(admitted, "carol reads the posts after she was admitted: \(carolRead), \(carolSaw)")
        XCTAssertFalse(carolRead.contains("carol must not read this"), "never the post made before she was admitted")
        await carolClient.close()
        await bobClient.close()
        await aliceClient.close()
    }
}

/// How `simp listen` tells of a join by name and of an admit: a line on standard error, or a
/// JSON event with the user, the room and who admitted.
final class RoomAdmissionNoticeTests: XCTestCase {
    func testAJoinByNameAndAnAdmitAreToldOnStandardErrorAndAsJSONEvents() throws {
        let waiting = EndToEndNotice.roomJoinNotAdmitted(user: "carol", room: "ops")
        XCTAssertEqual(
            waiting.errorLine, "simp: carol joined #ops by name and cannot read it: no member admitted carol (simp chat: /admit carol #ops)")
        let event = try JSONSerialization.jsonObject(with: Data(waiting.jsonLine.utf8)) as? [String: Any]
        XCTAssertEqual(event?["event"] as? String, "roomJoinNotAdmitted")
        XCTAssertEqual(event?["user"] as? String, "carol")
        XCTAssertEqual(event?["room"] as? String, "ops")
        let admitted =
            try JSONSerialization.jsonObject(
                with: Data(EndToEndNotice.roomAdmitted(user: "carol", room: "ops", by: "alice").jsonLine.utf8)) as? [String: Any]
        XCTAssertEqual(admitted?["event"] as? String, "roomAdmitted")
        XCTAssertEqual(admitted?["by"] as? String, "alice")
    }
}
