import Foundation
import Logging
import NIOCore
import NIOPosix
import SIMPCore
import SIMPRedis
import SIMPRelay
import SIMPTestSupport
import XCTest

/// The durable per-user log and the devices' cursors (docs/PROTOCOL.md §6.6, §7.8): each story
/// runs on real Redis and on the in-memory store (which must behave the same), through the
/// requests the relay makes.
final class UserLogTests: StoreTestCase {

    // MARK: The stories

    func testTheFirstDeviceGetsWhatWaitedAndALaterNewDeviceWhatIsStoredFromThenOn() async throws {
        for store in try await bothStores() {
            let log = UserLog(store, user: TestRelay.uniqueUser("bob"), loop: loop)
            try await log.store(1, 2)
            try await log.register("phone")
            try await log.expect("phone", [1, 2], "the first device gets what was stored before the user had one")
            try await log.store(3)
            try await log.register("laptop")
            try await log.expect("laptop", [], "a later new device starts after what is stored")
            try await log.store(4)
            try await log.expect("laptop", [4])
            try await log.expect("laptop", [4], "reading is not receiving: the entry stays until receipted")
            try await log.expect("phone", [1, 2, 3, 4], "the laptop took nothing from the phone")
        }
    }

    func testOutOfOrderReceiptsAdvanceTheCursorOverWhatWasReceipted() async throws {
        for store in try await bothStores() {
            let log = UserLog(store, user: TestRelay.uniqueUser("bob"), loop: loop)
            try await log.register("phone")
            try await log.register("laptop")
            try await log.store(1, 2, 3, 4, 5)
            try await log.ack("phone", 2, 4, 3)
            try await log.expect("phone", [1, 5], "receipted entries beyond the gap are not sent again")
            try await log.ack("phone", 1)
            try await log.expect("phone", [5])
            try await log.expect("laptop", [1, 2, 3, 4, 5])
            if let redis = store as? RedisRelayStore {
                let cursor = try await redis.redis.command(["HGET", InboxStore.cursorsKey(log.user), "c:phone"]).string
                let acked = try await redis.redis.command(["SCARD", InboxStore.ackedKey(log.user, device: "phone")]).integer
                let fourth = try await redis.redis.command(["HGET", InboxStore.idsKey(log.user), log.dedupeKey(4)]).string
                XCTAssertEqual(cursor, fourth, "the phone's cursor is at the 4th entry")
                XCTAssertEqual(acked, 0, "nothing receipted beyond the cursor is left over")
            }
            try await log.ack("laptop", 5, 1, 2, 3, 4)
            let left = try await log.length()
            XCTAssertEqual(left, 1, "\(store): only what the phone lacks stays")
        }
    }

    func testEntriesEveryDeviceHasLeaveTheLogAndItsKeysGo() async throws {
        for store in try await bothStores() {
            let log = UserLog(store, user: TestRelay.uniqueUser("bob"), loop: loop)
            try await log.register("phone")
            try await log.register("laptop")
            let ids = Array(UInt64(1)...50)
            for id in ids { try await log.store(id) }
            for id in ids { try await log.ack("phone", id) }
            let stillForLaptop = try await log.length()
            XCTAssertEqual(stillForLaptop, 50, "\(store)")
            for id in ids.reversed() { try await log.ack("laptop", id) }
            let left = try await log.length()
            XCTAssertEqual(left, 0, "\(store): delivered everywhere, nothing stays")
            if let redis = store as? RedisRelayStore {
                let keys = [
                    InboxStore.logKey(log.user), InboxStore.idsKey(log.user), InboxStore.cursorsKey(log.user),
                    InboxStore.ackedKey(log.user, device: "phone"), InboxStore.ackedKey(log.user, device: "laptop"),
                ]
                let existing = try await redis.redis.command(["EXISTS"] + keys).integer
                XCTAssertEqual(existing, 0, "an empty log leaves no key behind")
            }
            try await log.store(51)
            try await log.expect("phone", [51], "after an empty log, every device gets what comes")
            try await log.expect("laptop", [51])
        }
    }

    /// At the cap, what some device has makes room (the laptop lags, the phone has it; its sender
    /// heard DELIVERED_FROM_INBOX); what no device has is never dropped: the new entry is refused.
    func testAFullLogDropsWhatADeviceHasAndOtherwiseRefusesTheNewEntry() async throws {
        for store in try await bothStores({ $0.inboxMaxMessages = 3 }) {
            let log = UserLog(store, user: TestRelay.uniqueUser("bob"), loop: loop)
            try await log.register("phone")
            try await log.register("laptop")
            try await log.store(1, 2, 3)
            try await log.ack("phone", 1)
            let four = try await log.storeResult(4)
            XCTAssertEqual(four, InboxStoreResult(duplicate: false), "\(store): 1 reached the phone and makes room, unreported")
            let five = try await log.storeResult(5)
            XCTAssertEqual(five, InboxStoreResult(duplicate: false, refused: true), "\(store): 2, 3, 4 reached no device: 5 is refused")
            let again = try await log.storeResult(3)
            XCTAssertEqual(again, InboxStoreResult(duplicate: true), "a copy of a stored one is still a duplicate (STORED again)")
            try await log.expect("laptop", [2, 3, 4])
            try await log.expect("phone", [2, 3, 4])
            try await log.ack("phone", 2, 3, 4)
            try await log.ack("laptop", 2)
            let six = try await log.storeResult(6)
            XCTAssertEqual(six, InboxStoreResult(duplicate: false), "\(store): room again once entries are delivered")
            try await log.expect("laptop", [3, 4, 6])
        }
    }

    func testExpiredEntriesAreReportedOnceWhateverTheDevices() async throws {
        for store in try await bothStores({ $0.inboxTTLSeconds = 1 }) {
            let log = UserLog(store, user: TestRelay.uniqueUser("bob"), loop: loop)
            try await log.register("phone")
            try await log.register("laptop")
            try await log.store(1, 2)
            try await Task.sleep(nanoseconds: 1_100_000_000) // past the 1 s TTL (a lower bound: load only lengthens it)
            let atStore = try await log.store(3)
            XCTAssertEqual(atStore.map(\.entry.message.messageId), [1, 2], "\(store)")
            XCTAssertEqual(atStore.map(\.reason), [.expired, .expired])
            try await Task.sleep(nanoseconds: 1_100_000_000) // past the 1 s TTL (a lower bound: load only lengthens it)
            try await log.expect("phone", [3], "an entry that expired while nobody stored is read once, to be reported")
            try await log.expect("laptop", [], "and not again for another device")
        }
    }

    func testForgettingADeviceDropsItsCursorAndWhatTheOthersHaveLeaves() async throws {
        for store in try await bothStores({ $0.inboxTTLSeconds = 1 }) {
            let log = UserLog(store, user: TestRelay.uniqueUser("bob"), loop: loop)
            try await log.register("phone")
            try await log.register("laptop")
            try await log.store(1)
            try await log.ack("phone", 1)
            let kept = try await log.length()
            XCTAssertEqual(kept, 1, "\(store): the laptop does not have it yet")
            try await Task.sleep(nanoseconds: 1_100_000_000) // the laptop is away longer than the TTL (a lower bound)
            try await log.register("phone")
            let left = try await log.length()
            XCTAssertEqual(left, 0, "\(store): the laptop is forgotten; the phone has everything")
        }
    }

    /// 300 random steps (stores, out-of-order receipts, reads, a device joining) give the same
    /// answers from Redis and from memory.
    func testRedisAndMemoryAgreeOnARandomHistory() async throws {
        let stores = try await bothStores { $0.inboxMaxMessages = 8 }
        let user = TestRelay.uniqueUser("bob")
        let logs = stores.map { UserLog($0, user: user, loop: loop) }
        var random = SplitMix64(seed: 17)
        var devices = ["phone", "laptop"], next: UInt64 = 1
        for log in logs { for device in devices { try await log.register(device) } }
        for step in 0..<300 {
            let roll = random.next() % 10, device = devices[Int(random.next() % UInt64(devices.count))]
            let id = 1 + random.next() % next // a message stored so far (or the next one)
            let joins = roll == 8 && devices.count == 2 && step > 100
            var answers: [String] = []
            for log in logs {
                switch roll {
                case 0...3:
                    answers.append("\(try await log.store(next).map { "\($0.entry.message.messageId)\($0.reason)" })")
                case 4...7:
                    try await log.ack(device, id)
                    answers.append("\(try await log.length())")
                case 8 where joins:
                    try await log.register("tablet")
                    answers.append("\(try await log.load("tablet"))")
                default:
                    answers.append("\(try await log.load(device))")
                }
            }
            if roll <= 3 { next += 1 }
            if joins { devices.append("tablet") }
            XCTAssertEqual(answers[0], answers[1], "step \(step) (roll \(roll), \(device)): Redis and memory differ")
            if answers[0] != answers[1] { break }
        }
    }

    func testTheLogScriptsRunOnARedisCluster() async throws {
        let cluster = try await RedisClusterProcess.shared()
        let relays = try await ClusterRelays.start(on: cluster, relays: 0)
        addTeardownBlock { await relays.stop() }
        let store = RedisRelayStore(endpoint: .cluster(seeds: cluster.seeds), logger: Logger(label: "test"), eventLoop: loop)
        keep(store)
        for user in try await relays.usersOnDistinctMasters("logged", count: 3) {
            let log = UserLog(store, user: user, loop: loop)
            try await log.store(1)
            try await log.register("phone")
            try await log.register("laptop")
            try await log.store(2, 3)
            try await log.ack("phone", 3, 1)
            try await log.expect("phone", [2])
            try await log.expect("laptop", [2, 3])
            try await log.ack("phone", 2)
            try await log.ack("laptop", 2, 3)
            let left = try await log.length()
            XCTAssertEqual(left, 0, "\(user): delivered everywhere")
        }
    }

    /// Through a real relay: bob's phone is online, his laptop offline; the laptop, back, gets
    /// its backlog once and in order, and once both have everything the log is empty.
    func testAnOfflineDeviceGetsItsBacklogOnceWhenItComesBack() async throws {
        let (relay, alice, bob) = try await relayWithUsers()
        let (phone, sender) = try await phoneOnlineLaptopOffline(relay, alice: alice, bob: bob, sending: 30)
        let count = 30
        let atPhone = try await phone.messages().map(\.messageId)
        XCTAssertEqual(atPhone, Array(1...UInt64(count)))
        let laptopBacklog = try await relay.inspector.pendingEntries(bob, device: "laptop").count
        XCTAssertEqual(laptopBacklog, count, "the phone's receipts took nothing from the laptop")
        _ = sender

        let laptop = try await device(bob, "laptop", on: relay)
        _ = try await Eventually.holds {
            try await laptop.receiptNew()
            return try await laptop.messages().count >= count
        }
        _ = try await Eventually.stays { // quiet period: room for a duplicate
            try await laptop.receiptNew()
            return try await laptop.messages().count == count
        }
        let atLaptop = try await laptop.messages().map(\.messageId)
        XCTAssertEqual(atLaptop, Array(1...UInt64(count)), "the backlog, once and in order")
        let emptied = try await Eventually.holds { try await relay.inspector.logLength(bob) == 0 }
        XCTAssertTrue(emptied, "what both devices have leaves the log")
    }

    /// Through a real relay with a log of 3 entries: what the offline laptop lost to the cap
    /// had reached the phone, so alice is told nothing failed, and the laptop is told of the
    /// gap by the floor of what it gets (no wait for seqs it will never get).
    func testADeviceIsToldOfWhatTheCapTookFromItAndTheSenderOfNothing() async throws {
        let (relay, alice, bob) = try await relayWithUsers { $0.inboxMaxMessages = 3 }
        let (phone, sender) = try await phoneOnlineLaptopOffline(relay, alice: alice, bob: bob, sending: 3)
        _ = try await Eventually.holds { // the phone's receipts reached the log
            try await sender.frames(.receipt).filter { $0.status == .deliveredFromInbox }.count >= 3
        }
        for id in UInt64(4)...5 { try await sender.sendText(id, to: bob, stream: 4, seq: id, floor: 1) }
        _ = try await Eventually.holds {
            try await phone.receiptNew()
            return try await phone.messages().count >= 5
        }
        try await phone.receiptNew()
        let laptop = try await device(bob, "laptop", on: relay)
        _ = try await Eventually.holds {
            try await laptop.receiptNew()
            return try await laptop.messages().count >= 3
        }
        try await laptop.receiptNew()
        let got = try await laptop.messages()
        XCTAssertEqual(got.map(\.seq), [3, 4, 5], "the last 3 entries")
        XCTAssertEqual(got.first?.floor, 3, "the floor says seqs 1 and 2 are not coming")
        let errors = try await sender.frames(.error)
        XCTAssertEqual(errors.map(\.errorCode), [], "1 and 2 reached the phone: not reported discarded")
        let delivered = try await Eventually.holds {
            Set(try await sender.frames(.receipt).filter { $0.status == .deliveredFromInbox }.map(\.messageId)) == Set(1...5)
        }
        XCTAssertTrue(delivered)
    }

    private func relayWithUsers(_ configure: (inout RelayConfiguration) -> Void = { _ in }) async throws -> (TestRelay, String, String) {
        let relay = try await TestRelay.start(configure: configure)
        addTeardownBlock { await relay.stop() }
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        for user in [alice, bob] { try await relay.addUser(user) }
        return (relay, alice, bob)
    }

    private func device(_ user: String, _ name: String, on relay: TestRelay) async throws -> RawDevice {
        let device = try await RawDevice(user: user, password: TestRelay.password(for: user), device: name, controlPort: relay.port)
        addTeardownBlock { await device.close() }
        return device
    }

    /// bob's laptop known and offline, his phone online; alice's desk sends `count` messages
    /// (stream 4, seqs 1…count) and the phone receipts them all.
    private func phoneOnlineLaptopOffline(_ relay: TestRelay, alice: String, bob: String, sending count: Int) async throws -> (RawDevice, RawDevice) {
        await (try await device(bob, "laptop", on: relay)).close()
        let phone = try await device(bob, "phone", on: relay)
        let sender = try await device(alice, "desk", on: relay)
        for id in 1...UInt64(count) { try await sender.sendText(id, to: bob, stream: 4, seq: id, floor: 1) }
        _ = try await Eventually.holds {
            try await phone.receiptNew()
            return try await phone.messages().count >= count
        }
        try await phone.receiptNew() // what arrived after the last call
        return (phone, sender)
    }
}

/// One user's log through a `RelayStore`, with messages from "alice" named by their id.
private struct UserLog {
    let store: any RelayStore
    let user: String
    let loop: EventLoop

    init(_ store: any RelayStore, user: String, loop: EventLoop) {
        self.store = store
        self.user = user
        self.loop = loop
    }

    func message(_ id: UInt64) -> SIMPMessage {
        SIMPMessage(kind: .text, messageId: id, fromUser: "alice", toUser: user, content: "message \(id)")
    }

    func dedupeKey(_ id: UInt64) -> String { InboxEntry.dedupeKey(kind: .text, messageId: id, fromUser: "alice") }

    /// Registers (and leaves) a receiving session of `device`, making it known.
    func register(_ device: String) async throws {
        let route = Route(address: try SocketAddress(ipAddress: "127.0.0.1", port: 9), relayId: "test-relay")
        let registration = Registration(user: user, route: route, session: UUID().uuidString, device: device)
        _ = try await store.perform(.register(registration, connection: ConnectionID(1)), on: loop).get()
        _ = try await store.perform(.unregister(user: user, session: registration.session, device: device), on: loop).get()
    }

    /// Stores the messages `ids`; what was discarded meanwhile.
    @discardableResult
    func store(_ ids: UInt64...) async throws -> [DiscardedEntry] {
        var discarded: [DiscardedEntry] = []
        for id in ids {
            guard case .storeInInbox(_, _, _, let result) = try await store.perform(.storeInInbox(user: user, message: message(id)), on: loop).get()
            else {
                throw StoreFailure("unexpected answer to a store")
            }
            discarded += result.discarded
        }
        return discarded
    }

    func storeResult(_ id: UInt64) async throws -> InboxStoreResult {
        guard case .storeInInbox(_, _, _, let result) = try await store.perform(.storeInInbox(user: user, message: message(id)), on: loop).get()
        else {
            throw StoreFailure("unexpected answer to a store")
        }
        return result
    }

    func load(_ device: String) async throws -> [UInt64] {
        guard case .loadInbox(_, _, let entries, _, _) = try await store.perform(.loadInbox(user: user, device: device), on: loop).get() else {
            throw StoreFailure("unexpected answer to a load")
        }
        return entries.map(\.message.messageId)
    }

    func ack(_ device: String, _ ids: UInt64...) async throws {
        for id in ids {
            let entry = InboxEntry(message: message(id), storedAt: 0) // the relay removes by the entry's dedupe key
            _ = try await store.perform(.removeFromInbox(user: user, entry: entry, device: device), on: loop).get()
        }
    }

    func expect(_ device: String, _ ids: [UInt64], _ why: String = "", file: StaticString = #filePath, line: UInt = #line) async throws {
        let loaded = try await load(device)
        XCTAssertEqual(loaded, ids, "\(type(of: store)) \(device): \(why)", file: file, line: line)
    }

    /// Entries in the log, for every device.
    func length() async throws -> Int {
        if let redis = store as? RedisRelayStore { return Int(try await redis.redis.logLength(user)) }
        return (store as? InMemoryRelayStore)?.storedCount(of: user) ?? -1
    }
}
