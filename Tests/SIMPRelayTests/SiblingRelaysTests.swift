import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SIMPCore
import XCTest

@testable import SIMPRelay

/// The in-process hand-off between the relays of one process (`simp-server --threads N`),
/// on two real event loops.
final class SiblingRelaysTests: XCTestCase {
    /// A burst of deliveries asked for in one turn of the sender's loop reaches each receiving
    /// relay on the other loop in one hand-off (one task, one wake-up), every delivery once and
    /// in the order asked; the next turn's burst is handed over again.
    func testABurstForTheOtherLoopIsHandedOverOncePerReceiverInOrder() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let loops = Array(group.makeIterator())
        let senderLoop = loops[0], receiverLoop = loops[1]
        let siblings = SiblingRelays(), base = InMemoryRelayStore()
        let sender = SiblingAwareStore(base: base, siblings: siblings)
        let received = NIOLockedValueBox<[String: [String]]>([:])
        var receivers: [SiblingAwareStore] = []
        for relayId in ["b", "c"] {
            let store = SiblingAwareStore(base: base, siblings: siblings)
            try await store.subscribe(relayId: relayId, on: receiverLoop) { event in
                XCTAssertTrue(receiverLoop.inEventLoop)
                guard case .delivery(let bytes) = event, let delivery = try? RelayDelivery.decode(bytes),
                    case .datagram(let payload) = delivery.payload
                else { return }
                received.withLockedValue { $0[relayId, default: []].append(String(buffer: payload)) }
            }.get()
            receivers.append(store)
        }
        try await sender.subscribe(relayId: "a", on: senderLoop) { _ in }.get()
        XCTAssertFalse(senderLoop === receiverLoop)

        let burst = 50
        for turn in 0..<2 {
            try await senderLoop.submit {
                for index in 0..<burst {
                    for relayId in ["b", "c"] {
                        let delivery = RelayDelivery(user: "u-\(relayId)", payload: .datagram(ByteBuffer(string: "\(turn).\(index)")))
                        _ = sender.perform(.publish(relay: relayId, delivery), on: senderLoop)
                    }
                }
            }.get()
            let expected = (turn + 1) * burst
            for _ in 0..<500 where received.withLockedValue({ $0.values.map(\.count) }) != [expected, expected] {
                try await Task.sleep(nanoseconds: 10_000_000)
            }
        }

        let everyDelivery = (0..<2).flatMap { turn in (0..<burst).map { "\(turn).\($0)" } }
        let arrived = received.withLockedValue { $0 }
        XCTAssertEqual(arrived["b"], everyDelivery, "relay b: each delivery once, in order")
        XCTAssertEqual(arrived["c"], everyDelivery, "relay c: each delivery once, in order")
        XCTAssertEqual(siblings.handoffs, 4, "one hand-off per receiver and turn for \(4 * burst) deliveries")
        XCTAssertLessThan(siblings.handoffs, 4 * burst)
        for store in receivers + [sender] { await store.shutdown() }
        try await group.shutdownGracefully()
    }
}
