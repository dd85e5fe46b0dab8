import SIMPE2E
import XCTest

/// Property-style: thousands of messages both ways over a seeded lossy network that drops,
/// delays (reorders) and duplicates transmissions, with retransmission of the same bytes and
/// some messages given up on. Every message that arrives decrypts exactly once to what was
/// sent; every further copy is recognised as a duplicate; nothing else fails.
final class LossScheduleTests: XCTestCase {
    /// One transmission in flight.
    private struct Copy {
        let deliverAt: Int
        let id: Int
        let toBob: Bool
        let payload: [UInt8]
    }

    private struct Figures: Equatable {
        var sent = 0, delivered = 0, duplicates = 0, lost = 0
    }

    private func run(seed: UInt64, messages: Int) throws -> Figures {
        var pair = try Pair(seed: seed)
        var network = SeededRandom(seed: seed &* 31)
        try pair.aliceStarts()
        var inFlight: [Copy] = []
        var expected: [Int: String] = [:]
        var decrypted = Set<Int>()
        var figures = Figures()

        func send(_ id: Int, toBob: Bool, at step: Int) throws {
            let words = "message \(id) " + String(repeating: "x", count: Int(network.next() % 40))
            let payload = toBob ? try pair.aliceSends(words) : try pair.bobSends(words)
            expected[id] = words
            figures.sent += 1
            if network.next() % 100 < 2 { figures.lost += 1; return } // sender gave up: never arrives
            var attempt = 0
            repeat { // retransmit the same bytes until a transmission survives 20 % loss
                attempt += 1
                let delay = Int(network.next() % 60) + attempt * 10
                let dropped = network.next() % 100 < 20
                if !dropped { inFlight.append(Copy(deliverAt: step + delay, id: id, toBob: toBob, payload: payload)) }
                if !dropped, network.next() % 100 < 10 {
                    inFlight.append(Copy(deliverAt: step + delay + Int(network.next() % 80), id: id, toBob: toBob, payload: payload))
                }
                if !dropped { break }
            } while true
        }

        func deliver(_ copy: Copy) throws {
            do {
                let result =
                    copy.toBob
                    ? try pair.bobReceives(copy.payload, now: UInt64(copy.deliverAt) * 100)
                    : try pair.aliceReceives(copy.payload, now: UInt64(copy.deliverAt) * 100)
                XCTAssertTrue(decrypted.insert(copy.id).inserted, "message \(copy.id) decrypted twice")
                XCTAssertEqual(text(result), expected[copy.id])
                figures.delivered += 1
            } catch E2EError.duplicate {
                XCTAssertTrue(decrypted.contains(copy.id), "message \(copy.id) called a duplicate before it was decrypted")
                figures.duplicates += 1
            }
        }

        var step = 0
        for id in 0..<messages {
            step += 1
            let bobCanSend = try pair.bob.hasSession(with: "alice")
            try send(id, toBob: !bobCanSend || network.next() % 2 == 0, at: step)
            let due = inFlight.filter { $0.deliverAt <= step }
            inFlight.removeAll { $0.deliverAt <= step }
            for copy in due.shuffled(using: &network) { try deliver(copy) }
        }
        for copy in inFlight.sorted(by: { $0.deliverAt < $1.deliverAt }) { try deliver(copy) }
        XCTAssertEqual(figures.delivered, figures.sent - figures.lost)
        return figures
    }

    func testLossReorderingAndDuplicationNeverDesynchronise() throws {
        for seed: UInt64 in [1, 2, 3] {
            let figures = try run(seed: seed, messages: 2_000)
            XCTAssertGreaterThan(figures.duplicates, 100, "seed \(seed): the schedule duplicates")
            XCTAssertGreaterThan(figures.lost, 10, "seed \(seed): the schedule loses messages for good")
        }
    }

    func testTheScheduleIsReproducible() throws {
        XCTAssertEqual(try run(seed: 9, messages: 300), try run(seed: 9, messages: 300))
    }

    /// A 75 s blackout at 10 messages a second from each side: 750 messages each way wait, then
    /// their retransmissions (the same bytes, some twice) arrive in random order.
    func testA75SecondBlackoutThenRetransmissionsInAnyOrder() throws {
        var pair = try Pair(seed: 75)
        try pair.aliceStarts()
        _ = try pair.bobReceives(try pair.aliceSends("before"))
        _ = try pair.aliceReceives(try pair.bobSends("before"))
        var waiting: [(toBob: Bool, text: String, payload: [UInt8])] = []
        for index in 0..<750 {
            waiting.append((true, "a\(index)", try pair.aliceSends("a\(index)")))
            waiting.append((false, "b\(index)", try pair.bobSends("b\(index)")))
        }
        var order = SeededRandom(seed: 76)
        let retransmissions = (waiting + waiting.filter { _ in order.next() % 4 == 0 }).shuffled(using: &order)
        var decrypted = Set<String>()
        for copy in retransmissions {
            let now: UInt64 = 75_000
            do {
                let result = copy.toBob ? try pair.bobReceives(copy.payload, now: now) : try pair.aliceReceives(copy.payload, now: now)
                XCTAssertEqual(text(result), copy.text)
                XCTAssertTrue(decrypted.insert(copy.text).inserted)
            } catch E2EError.duplicate {
                XCTAssertTrue(decrypted.contains(copy.text))
            }
        }
        XCTAssertEqual(decrypted.count, 1_500)
        XCTAssertEqual(text(try pair.bobReceives(try pair.aliceSends("after"))), "after")
        XCTAssertEqual(text(try pair.aliceReceives(try pair.bobSends("after"))), "after")
    }
}
