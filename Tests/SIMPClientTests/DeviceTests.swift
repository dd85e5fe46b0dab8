import Foundation
import SIMPClient
import SIMPCore
import XCTest

/// Device names, the default device kept in `$SIMP_HOME`, device locks and the outbox on disk.
final class DeviceTests: XCTestCase {
    var home: URL!

    override func setUp() {
        home = FileManager.default.temporaryDirectory.appendingPathComponent("simp-home-\(UUID().uuidString)")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: home)
    }

    func testDeviceNamesAreOneToSixtyFourBytesOfLettersDigitsDotUnderscoreDash() {
        for good in ["laptop", "a", "phone-2", "host.example_1", String(repeating: "x", count: 64)] {
            XCTAssertNil(DeviceName.problem(with: good), good)
        }
        XCTAssertEqual(DeviceName.problem(with: ""), "a device name must not be empty")
        XCTAssertEqual(
            DeviceName.problem(with: String(repeating: "x", count: 65)),
            "device name \"\(String(repeating: "x", count: 65))\" is longer than 64 bytes")
        for bad in ["my phone", "laptop/1", "tél", "a:b", "日本"] {
            XCTAssertEqual(
                DeviceName.problem(with: bad),
                "device name \"\(bad)\" may only contain letters A-Z and a-z, digits, '.', '_' and '-'", bad)
        }
    }

    func testTheDefaultDeviceIsMadeOnceAndKept() throws {
        let first = try DeviceName.standard(home: home)
        XCTAssertNil(DeviceName.problem(with: first), first)
        XCTAssertEqual(try DeviceName.standard(home: home), first)
        let kept = try String(contentsOf: home.appendingPathComponent("device"), encoding: .utf8)
        XCTAssertEqual(kept, first + "\n")

        try Data("not a name!\n".utf8).write(to: home.appendingPathComponent("device"))
        XCTAssertThrowsError(try DeviceName.standard(home: home)) { error in
            XCTAssertTrue("\(error)".contains("device: device name \"not a name!\" may only contain"), "\(error)")
        }
    }

    /// Other users see device names: the default one is random words, never the host name.
    func testTheDefaultDeviceNameIsRandomWordsNotTheHostName() throws {
        let name = try DeviceName.standard(home: home)
        let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? ""
        XCTAssertFalse(!host.isEmpty && name.lowercased().contains(host.lowercased()), "\(name) names the host \(host)")
        XCTAssertNotNil(name.range(of: #"^[a-z]+-[a-z]+-[0-9a-f]{4}$"#, options: .regularExpression), name)
        var random = SystemRandomNumberGenerator()
        let names = Set((0..<50).map { _ in RandomDeviceName.make(using: &random) })
        XCTAssertGreaterThan(names.count, 45, "random: \(names)")
        XCTAssertTrue(names.allSatisfy { DeviceName.problem(with: $0) == nil })
    }

    func testAHomeThatIsAFileIsNamedInTheError() throws {
        try Data("not a directory\n".utf8).write(to: home)
        XCTAssertThrowsError(try DeviceLock.acquire(home: home, user: "alice", device: "laptop")) { error in
            XCTAssertEqual(
                error as? DeviceError,
                DeviceError(
                    "cannot create the directory \(home.path)/devices/alice: \(home.path) is a file, not a directory"
                        + " (set SIMP_HOME to another directory)"))
        }
    }

    func testTwoRunningClientsNeverShareADefaultDevice() throws {
        let base = try DeviceName.standard(home: home)
        let first = try DeviceLock.acquire(home: home, user: "dave", device: nil)
        let second = try DeviceLock.acquire(home: home, user: "dave", device: nil)
        let third = try DeviceLock.acquire(home: home, user: "dave", device: nil)
        XCTAssertEqual([first.device, second.device, third.device], [base, base + "-2", base + "-3"])
        // Another user on the same machine has the same default device, locked separately.
        XCTAssertEqual(try DeviceLock.acquire(home: home, user: "erin", device: nil).device, base)

        first.release()
        XCTAssertEqual(try DeviceLock.acquire(home: home, user: "dave", device: nil).device, base, "a released device is free again")
        withExtendedLifetime((second, third)) {}
    }

    func testAnExplicitDeviceInUseIsRefusedByName() throws {
        let held = try DeviceLock.acquire(home: home, user: "dave", device: "phone")
        XCTAssertThrowsError(try DeviceLock.acquire(home: home, user: "dave", device: "phone")) { error in
            XCTAssertEqual("\(error)", "device \"phone\" of dave is in use by another running simp (process \(getpid())); give another --device NAME")
        }
        XCTAssertEqual(try DeviceLock.acquire(home: home, user: "dave", device: "tablet").device, "tablet")
        XCTAssertThrowsError(try DeviceLock.acquire(home: home, user: "dave", device: "bad name"))
        held.release()
        XCTAssertEqual(try DeviceLock.acquire(home: home, user: "dave", device: "phone").device, "phone")
    }

    func testTheOutboxKeepsMessagesByIdUntilRemoved() throws {
        let outbox = try Outbox(home: home, user: "alice", device: "laptop")
        var text = SIMPMessage(kind: .text, messageId: 1_795_000_000_000_002, fromUser: "alice", toUser: "bob", content: "second ✓")
        text.time = 1_795_000_000_000
        var image = SIMPMessage(kind: .image, messageId: 1_795_000_000_000_001, fromUser: "alice", toUser: "#lobby")
        image.imageURL = "https://example.com/cat.png"
        image.imageScale = 0.5
        try outbox.save(text)
        try outbox.save(image)
        try outbox.save(text) // saved again when resent: still one
        XCTAssertEqual(outbox.load().messages, [image, text], "oldest id first, every field kept")

        outbox.remove(image.messageId)
        outbox.remove(42) // not there: nothing happens
        XCTAssertEqual(outbox.load().messages, [text])
        XCTAssertEqual(try Outbox(home: home, user: "alice", device: "laptop").load().messages, [text], "on disk, not in memory")
        XCTAssertEqual(try Outbox(home: home, user: "alice", device: "phone").count, 0, "each device has its own")
    }

    func testAnUnfinishedSaveIsDroppedAndAnUnreadableFileSetAside() throws {
        let outbox = try Outbox(home: home, user: "alice", device: "laptop")
        try Data([1, 2, 3]).write(to: outbox.directory.appendingPathComponent("7.simp.partial"))
        try Data("garbage".utf8).write(to: outbox.directory.appendingPathComponent("8.simp"))
        let (messages, unreadable) = outbox.load()
        XCTAssertEqual(messages, [])
        XCTAssertEqual(unreadable, ["8.simp"])
        let left = try FileManager.default.contentsOfDirectory(atPath: outbox.directory.path)
        XCTAssertEqual(left, ["8.simp.bad"])
    }
}
