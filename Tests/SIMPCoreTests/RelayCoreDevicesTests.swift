import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// Sessions per (user, device) and send-only sessions in the relay core (docs/PROTOCOL.md
/// §4.3, §4.7): who replaces whom, where content goes when a user has several devices.
final class RelayCoreDevicesTests: XCTestCase {
    private let t0 = DevRelay.t0

    /// A device's session as its client holds it.
    private struct Device {
        var connection: ConnectionID
        var registration: Registration
        var opener: DatagramOpener
        var sealer: DatagramSealer
    }

    /// Connects `user`'s `device` on `connection` (UDP port 6000 + connection number); the
    /// store answers that the user has `knownDevices` known devices.
    private func connect(
        _ user: String, device: String, sendOnly: Bool = false, on connection: ConnectionID, knownDevices: Int = 1,
        into relay: inout DevRelay
    ) throws -> (Device, [RelayAction]) {
        _ = relay.open(connection)
        var connect = DevRelay.connectMessage(user, udpPort: 6000 + Int(connection.rawValue))
        connect.device = device
        connect.sendOnly = sendOnly
        let registering = relay.control(connect, on: connection)
        guard case .store(.register(let registration, connection))? = registering.last else {
            throw MissingStep(description: "no register: \(registering)")
        }
        XCTAssertEqual(registration.device, device)
        XCTAssertEqual(registration.receives, !sendOnly)
        let actions = relay.answer(.register(connection: connection, knownDevices: knownDevices, elsewhere: false))
        guard case .send(connection, let connected)? = actions.first, connected.kind == .connected else {
            throw MissingStep(description: "no CONNECTED: \(actions)")
        }
        let keys = SessionKeys(sessionId: connected.sessionId, secret: connected.sessionSecret)
        let client = Device(
            connection: connection, registration: registration, opener: DatagramOpener(keys: keys, direction: .downlink),
            sealer: DatagramSealer(keys: keys, direction: .uplink))
        return (client, Array(registering.dropLast()) + actions)
    }

    private func hello(_ device: inout Device, into relay: inout DevRelay) -> [RelayAction] {
        relay.datagram(device.sealer.seal(SIMPMessage(kind: .hello, fromUser: device.registration.user)), from: device.registration.route.address)
    }

    func testWhatIsStoredWhileADevicesBacklogIsReadGoesOutAfterTheBacklog() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: ConnectionID(9), port: 5009)
        _ = try connect("bob", device: "phone", on: ConnectionID(1), into: &relay)
        var (laptop, _) = try connect("bob", device: "laptop", on: ConnectionID(2), knownDevices: 2, into: &relay)
        _ = hello(&laptop, into: &relay)
        func stored(_ seq: UInt64) -> (SIMPMessage, InboxEntry) {
            var message = textMessage(seq, from: "alice", to: "bob")
            message.stream = 3
            message.seq = seq
            message.floor = 1
            return (message, InboxEntry(message: message, storedAt: 1000))
        }
        let (live, liveEntry) = stored(3)
        let whileReading = relay.answer(.storeInInbox(user: "bob", message: live, liveEntry, InboxStoreResult(duplicate: false)))
        XCTAssertFalse(
            whileReading.contains {
                if case .deliver(_, _, laptop.registration.route.address) = $0 { return true }; return false
            },
            "not before the laptop's backlog: \(whileReading)")
        let backlog = [stored(1).1, stored(2).1]
        let loaded = relay.answer(.loadInbox(user: "bob", device: "laptop", backlog, wallNow: 2000))
        let order = try loaded.compactMap { action -> UInt64? in
            guard case .deliver(_, let bytes, laptop.registration.route.address) = action else { return nil }
            return try MessageCodec.decode(laptop.opener.open(bytes).payload).seq
        }
        XCTAssertEqual(order, [1, 2, 3], "the backlog, then what was stored while it was read")
    }

    func testWhatIsStoredWhileADevicesRegistrationIsWrittenGoesOutAfterItsBacklog() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: ConnectionID(9), port: 5009)
        _ = try connect("bob", device: "phone", on: ConnectionID(1), knownDevices: 2, into: &relay)
        let laptopConnection = ConnectionID(2)
        _ = relay.open(laptopConnection)
        var connect = DevRelay.connectMessage("bob", udpPort: 6002)
        connect.device = "laptop"
        let registering = relay.control(connect, on: laptopConnection)
        guard case .store(.register(let registration, laptopConnection))? = registering.last else { return XCTFail("no register: \(registering)") }
        func stored(_ seq: UInt64, floor: UInt64) -> (SIMPMessage, InboxEntry) {
            var message = textMessage(seq, from: "alice", to: "bob")
            (message.stream, message.seq, message.floor) = (3, seq, floor)
            return (message, InboxEntry(message: message, storedAt: 1000))
        }
        // Stored while the laptop's registration is being written; the phone has 1-2 already, so
        // alice's floor is 3.
        let (live, liveEntry) = stored(3, floor: 3)
        let whileRegistering = relay.answer(.storeInInbox(user: "bob", message: live, liveEntry, InboxStoreResult(duplicate: false)))
        XCTAssertFalse(
            whileRegistering.contains {
                if case .deliver(_, _, registration.route.address) = $0 { return true }; return false
            },
            "not before the laptop's backlog: \(whileRegistering)")
        let actions = relay.answer(.register(connection: laptopConnection, knownDevices: 2, elsewhere: false))
        guard case .send(laptopConnection, let connected)? = actions.first else { return XCTFail("no CONNECTED: \(actions)") }
        let keys = SessionKeys(sessionId: connected.sessionId, secret: connected.sessionSecret)
        var opener = DatagramOpener(keys: keys, direction: .downlink)
        var sealer = DatagramSealer(keys: keys, direction: .uplink)
        _ = relay.datagram(sealer.seal(SIMPMessage(kind: .hello, fromUser: "bob")), from: registration.route.address)
        let loaded = relay.answer(.loadInbox(user: "bob", device: "laptop", [stored(1, floor: 1).1, stored(2, floor: 1).1], wallNow: 2000))
        let sent = try loaded.compactMap { action -> SIMPMessage? in
            guard case .deliver(_, let bytes, registration.route.address) = action else { return nil }
            return try MessageCodec.decode(opener.open(bytes).payload)
        }
        XCTAssertEqual(sent.map { $0.seq }, [1, 2, 3], "the backlog first")
        XCTAssertEqual(sent.map { $0.floor }, [1, 1, 1], "no floor past the backlog: the laptop waits for 1 and 2")
    }

    func testASendOnlySessionNeitherReceivesStoredMessagesNorReplacesTheDevice() throws {
        var relay = DevRelay()
        var (receiving, _) = try connect("dave", device: "laptop", on: ConnectionID(1), into: &relay)
        XCTAssertEqual(
            hello(&receiving, into: &relay).first, .store(.loadInbox(user: "dave", device: "laptop")), "a receiving session reads its inbox")
        var (oneShot, actions) = try connect("dave", device: "laptop", sendOnly: true, on: ConnectionID(2), into: &relay)
        XCTAssertTrue(actions.contains(.event(.userConnected(oneShot.registration))), "a send-only session is a connected user too")
        XCTAssertFalse(
            actions.contains {
                if case .close = $0 { return true }; return false
            }, "nobody is replaced: \(actions)")
        XCTAssertFalse(actions.contains(.store(.recordPresence(user: "dave", online: true))), "presence is the receiving sessions'")
        let helloActions = hello(&oneShot, into: &relay)
        XCTAssertEqual(helloActions.count, 1, "only the HELLO answer, no inbox read: \(helloActions)")
        XCTAssertEqual(relay.core.sessions(of: "dave").map(\.receives), [true, false])
        XCTAssertEqual(
            relay.closed(ConnectionID(2)),
            [
                .event(.userDisconnected(oneShot.registration, .connectionClosed)),
                .store(.unregister(user: "dave", session: "r1/2", device: "laptop")),
            ],
            "its end changes nothing for the receiving session (no presence change)")
    }

    func testANewerSessionOfADeviceReplacesOnlyThatDevice() throws {
        var relay = DevRelay()
        let (phone, _) = try connect("bob", device: "phone", on: ConnectionID(1), into: &relay)
        let (_, second) = try connect("bob", device: "laptop", on: ConnectionID(2), knownDevices: 2, into: &relay)
        XCTAssertFalse(second.contains(.close(ConnectionID(1))), "another device leaves the phone alone")
        let (_, third) = try connect("bob", device: "phone", on: ConnectionID(3), knownDevices: 2, into: &relay)
        XCTAssertEqual(
            Array(third.prefix(3)),
            [
                .event(.userDisconnected(phone.registration, .replaced)),
                .send(ConnectionID(1), .error(.alreadyConnected, "a newer session of bob's device \"phone\" took over")),
                .close(ConnectionID(1)),
            ])
        XCTAssertFalse(third.contains(.close(ConnectionID(2))))
        XCTAssertEqual(relay.core.sessions(of: "bob").map(\.session), ["r1/2", "r1/3"])
    }

    func testContentForAUserWithTwoDevicesIsStoredForEachAndSentToBoth() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: ConnectionID(9), port: 5009)
        var (phone, _) = try connect("bob", device: "phone", on: ConnectionID(1), into: &relay)
        var (laptop, _) = try connect("bob", device: "laptop", on: ConnectionID(2), knownDevices: 2, into: &relay)
        _ = hello(&phone, into: &relay)
        _ = hello(&laptop, into: &relay)
        for device in ["phone", "laptop"] { // nothing was stored for them
            XCTAssertEqual(relay.answer(.loadInbox(user: "bob", device: device, [], wallNow: 0)), [])
        }
        var message = textMessage(5, from: "alice", to: "bob")
        message.stream = 3
        message.seq = 1
        XCTAssertEqual(relay.send(message), [.store(.storeInInbox(user: "bob", message: message))], "custody: stored for every device")

        let entry = InboxEntry(message: message, storedAt: 1000)
        let stored = relay.answer(.storeInInbox(user: "bob", message: message, entry, InboxStoreResult(duplicate: false)))
        var delivered: [String] = []
        for case .deliver("bob", let bytes, let address) in stored {
            let isPhone = address == phone.registration.route.address
            let opened = isPhone ? try phone.opener.open(bytes) : try laptop.opener.open(bytes)
            XCTAssertEqual(try MessageCodec.decode(opened.payload).messageId, 5)
            delivered.append(isPhone ? "phone" : "laptop")
        }
        XCTAssertEqual(delivered.sorted(), ["laptop", "phone"], "each online device gets it")
        XCTAssertTrue(
            stored.contains(.send(ConnectionID(9), onlineStoredReceipt(5, from: "bob", to: "alice"))),
            "alice hears it is stored, and that bob is online")

        var receipt = message.receipt(holdMicros: 0)
        receipt.attempt = 1
        let fromLaptop = relay.control(receipt, on: laptop.connection)
        XCTAssertEqual(
            fromLaptop,
            [
                .store(.removeFromInbox(user: "bob", entry: entry, device: "laptop")),
                .send(ConnectionID(9), statusReceipt(5, from: "bob", to: "alice", .deliveredFromInbox)),
            ],
            "the laptop's receipt removes only the laptop's copy")
    }

    /// Bob is online on his phone and has a second known device (the laptop,
    /// offline), so the relay takes custody of alice's message; its STORED says bob is online
    /// (alice's client must not say "offline"). Once the phone is gone too, it no longer does.
    func testStoredForAUserWithOneOfTwoDevicesOnlineSaysTheReceiverIsOnline() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: ConnectionID(9), port: 5009)
        var (phone, _) = try connect("bob", device: "phone", on: ConnectionID(1), knownDevices: 2, into: &relay)
        _ = hello(&phone, into: &relay)
        _ = relay.answer(.loadInbox(user: "bob", device: "phone", [], wallNow: 0))
        func storedReceipt(_ id: UInt64) -> SIMPMessage? {
            let message = textMessage(id, from: "alice", to: "bob")
            var routed = relay.send(message)
            if routed == [.store(.lookup(user: "bob"))] { // no session here: the store says bob has two devices, none online
                let offline = UserRoutes(receivers: [], relays: [], knownDevices: 2, known: true)
                routed = relay.answer(.lookup(user: "bob", offline))
            }
            XCTAssertEqual(routed, [.store(.storeInInbox(user: "bob", message: message))], "custody: two known devices")
            let entry = InboxEntry(message: message, storedAt: 1000)
            let actions = relay.answer(.storeInInbox(user: "bob", message: message, entry, InboxStoreResult(duplicate: false)))
            for case .send(ConnectionID(9), let receipt) in actions where receipt.status == .stored { return receipt }
            return nil
        }
        XCTAssertEqual(storedReceipt(5), onlineStoredReceipt(5, from: "bob", to: "alice"), "the phone is online and gets it now")

        _ = relay.closed(phone.connection)
        XCTAssertEqual(storedReceipt(6), statusReceipt(6, from: "bob", to: "alice", .stored), "no device online: offline, as before")
    }

    /// The devices among `devices` whose address a delivery in `actions` went to, each opened
    /// with its keys and checked to carry TYPING `id`.
    private func typingReached(_ devices: [String: Device], id: UInt64, in actions: [RelayAction]) throws -> [String] {
        var reached: [String] = []
        for case .deliver("bob", let bytes, let address) in actions {
            guard let (name, device) = devices.first(where: { $0.value.registration.route.address == address }) else {
                XCTFail("a delivery to \(address), no device of bob's")
                continue
            }
            var opener = device.opener
            let message = try MessageCodec.decode(opener.open(bytes).payload)
            XCTAssertEqual(message.kind, .typing)
            XCTAssertEqual(message.messageId, id)
            reached.append(name)
        }
        return reached.sorted()
    }

    func testTypingReachesEveryOnlineDeviceOfAUserWithSeveralKnownDevicesAndIsNeverStored() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: ConnectionID(9), port: 5009)
        // A newcomer: an earlier `simp send` made the default device known, then `simp chat` connected as "laptop".
        var (laptop, _) = try connect("bob", device: "laptop", on: ConnectionID(1), knownDevices: 2, into: &relay)
        _ = hello(&laptop, into: &relay)
        _ = try connect("bob", device: "laptop", sendOnly: true, on: ConnectionID(3), knownDevices: 2, into: &relay)
        let first = relay.send(SIMPMessage(kind: .typing, messageId: 11, fromUser: "alice", toUser: "bob"))
        XCTAssertEqual(try typingReached(["laptop": laptop], id: 11, in: first), ["laptop"], "the one online device of two known: \(first)")
        XCTAssertEqual(first.count, 1, "only the delivery: nothing stored, no send-only session: \(first)")

        var (phone, _) = try connect("bob", device: "phone", on: ConnectionID(2), knownDevices: 2, into: &relay)
        _ = hello(&phone, into: &relay)
        let both = relay.send(SIMPMessage(kind: .typing, messageId: 12, fromUser: "alice", toUser: "bob"))
        XCTAssertEqual(try typingReached(["laptop": laptop, "phone": phone], id: 12, in: both), ["laptop", "phone"], "\(both)")
        XCTAssertEqual(both.count, 2, "nothing stored: \(both)")

        let typing = SIMPMessage(kind: .typing, messageId: 13, fromUser: "carol", toUser: "bob")
        let handedOver = relay.relayDelivery(RelayDelivery(user: "bob", payload: .datagram(MessageCodec.encode(typing))))
        XCTAssertEqual(
            try typingReached(["laptop": laptop, "phone": phone], id: 13, in: handedOver), ["laptop", "phone"],
            "from another relay too: \(handedOver)")
        XCTAssertEqual(handedOver.count, 2, "nothing stored: \(handedOver)")
    }

    func testTypingForAUserWithDevicesOnOtherRelaysGoesToEachOfThem() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: ConnectionID(9), port: 5009)
        let typing = SIMPMessage(kind: .typing, messageId: 11, fromUser: "alice", toUser: "bob")
        XCTAssertEqual(relay.send(typing), [.store(.lookup(user: "bob"))])
        let r2 = Route(address: address("10.0.0.2", 7000), relayId: "r2"), r3 = Route(address: address("10.0.0.3", 7000), relayId: "r3")
        let routes = UserRoutes(receivers: [r2, r3], relays: ["r2", "r3"], knownDevices: 3, known: true)
        let delivery = RelayDelivery(user: "bob", payload: .datagram(MessageCodec.encode(typing)))
        XCTAssertEqual(
            relay.answer(.lookup(user: "bob", routes)),
            [.store(.publish(relay: "r2", delivery)), .store(.publish(relay: "r3", delivery))],
            "each relay holding an online device, nothing stored")
    }

    func testAFileAcknowledgementReachesASendOnlySenderOnAnotherRelay() throws {
        // bob's device receives here; alice's `simp send --file` is a send-only session on r2.
        var relay = DevRelay()
        try relay.connect("bob", on: ConnectionID(9), port: 5009)
        var ack = SIMPMessage(kind: .fileAck, fromUser: "bob", toUser: "alice")
        ack.fileId = 99
        ack.fileRanges = [0, 5]
        XCTAssertEqual(relay.send(ack), [.store(.lookup(user: "alice"))])
        let sendOnly = UserRoutes(receivers: [], relays: ["r2"], knownDevices: 1, known: true)
        let delivery = RelayDelivery(user: "alice", payload: .datagram(MessageCodec.encode(ack)))
        XCTAssertEqual(relay.answer(.lookup(user: "alice", sendOnly)), [.store(.publish(relay: "r2", delivery))])

        // On r2, the send-only session gets it (a chunk would not: it only goes to receivers).
        var other = DevRelay()
        var (oneShot, _) = try connect("alice", device: "laptop", sendOnly: true, on: ConnectionID(2), into: &other)
        let handedOver = other.relayDelivery(delivery)
        guard case .deliver("alice", let bytes, oneShot.registration.route.address)? = handedOver.first, handedOver.count == 1 else {
            return XCTFail("\(handedOver)")
        }
        XCTAssertEqual(try MessageCodec.decode(oneShot.opener.open(bytes).payload).fileRanges, [0, 5])
    }

    func testUnknownRecipientIsToldOnlyToTheSessionThatSent() throws {
        var relay = DevRelay()
        var (chat, _) = try connect("alice", device: "laptop", on: ConnectionID(1), into: &relay)
        _ = hello(&chat, into: &relay)
        var (oneShot, _) = try connect("alice", device: "laptop", sendOnly: true, on: ConnectionID(2), into: &relay)
        let sent = relay.datagram(oneShot.sealer.seal(textMessage(5, from: "alice", to: "carol")), from: oneShot.registration.route.address)
        XCTAssertEqual(sent, [.store(.lookup(user: "carol"))])
        var error = SIMPMessage.error(.unknownRecipient, "no user \"carol\" is registered", messageId: 5, to: "alice")
        error.fromUser = "carol"
        XCTAssertEqual(
            relay.answer(.lookup(user: "carol", .single(nil, known: false))),
            [.reject(.unknownRecipient, detail: "alice -> carol"), .send(oneShot.connection, error)],
            "the one-shot sender hears it, the chat session does not")
        let cached = relay.datagram(chat.sealer.seal(textMessage(6, from: "alice", to: "carol")), from: chat.registration.route.address)
        error.messageId = 6
        XCTAssertEqual(cached, [.reject(.unknownRecipient, detail: "alice -> carol"), .send(chat.connection, error)], "from the cache too")
    }

    func testAUserWithDevicesOnOtherRelaysGetsCustodyAndEachRelayIsTold() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: ConnectionID(9), port: 5009)
        let message = textMessage(5, from: "alice", to: "bob")
        XCTAssertEqual(relay.send(message), [.store(.lookup(user: "bob"))])
        let r2 = Route(address: address("10.0.0.2", 7000), relayId: "r2"), r3 = Route(address: address("10.0.0.3", 7000), relayId: "r3")
        let routes = UserRoutes(receivers: [r2, r3], relays: ["r2", "r3"], knownDevices: 2, known: true)
        XCTAssertEqual(
            relay.answer(.lookup(user: "bob", routes)), [.store(.storeInInbox(user: "bob", message: message))],
            "two devices: stored for each, not forwarded")
        let entry = InboxEntry(message: message, storedAt: 1000)
        XCTAssertEqual(
            relay.answer(.storeInInbox(user: "bob", message: message, entry, InboxStoreResult(duplicate: false))),
            [
                .event(.inboxStored(InboxStored(user: "bob", from: "alice", messageId: 5, kind: .text))),
                .send(ConnectionID(9), onlineStoredReceipt(5, from: "bob", to: "alice")),
                .store(.publish(relay: "r2", RelayDelivery(user: "bob", payload: .inboxEntry(entry)))),
                .store(.publish(relay: "r3", RelayDelivery(user: "bob", payload: .inboxEntry(entry)))),
            ],
            "each relay holding a device hands the entry over")

        let one = UserRoutes(receivers: [r2], relays: ["r2"], knownDevices: 1, known: true)
        let next = textMessage(6, from: "alice", to: "carol")
        XCTAssertEqual(relay.send(next), [.store(.lookup(user: "carol"))])
        guard case .store(.publish(relay: "r2", let delivery))? = relay.answer(.lookup(user: "carol", one)).first,
            case .datagram = delivery.payload
        else { return XCTFail("one known device online: forwarded live") }
    }
}

/// A step the test builds on did not happen. Thrown, it fails the test with what happened
/// instead (an `XCTSkip` here would turn a regression into a skip).
private struct MissingStep: Error, CustomStringConvertible {
    let description: String
}
