import NIOCore
import SIMPCore
import SIMPCoreTestKit
import SIMPE2E
import XCTest

/// The relay's key directory log (docs/E2E.md §18): a KEYS_FETCH answer carrying a device list
/// proves it in the signed log and proves the log extends the size the asker says it verified;
/// a client's `KeyDirectoryView` accepts the honest answers and refuses a forked log's.
final class RelayCoreKeyLogTests: XCTestCase {
    private let alice = ConnectionID(1)
    private let bundle = SignedBundles.published(seed: 1)
    private let bobList = SignedDeviceLists.list(user: "bob", devices: ["laptop"], seed: 4)
    private let treeKey: TreeKeySecret = {
        var random = SplitMix64(seed: 150)
        return KeyLogSnapshot.newTreeKeySecret(using: &random)
    }()

    private func leaves(_ names: [String]) -> [[UInt8]] { names.map { KeyLogSnapshot.leafHash(of: Array($0.utf8)) } }

    /// alice's fetch of bob's keys, answered from `log`; returns the answer's proof.
    private func fetch(
        knownTreeSize: UInt64, log: KeyLogSnapshot?, deviceList: [UInt8]? = nil, file: StaticString = #filePath, line: UInt = #line
    ) throws -> DirectoryProof {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        var message = SIMPMessage(kind: .keysFetch, messageId: 5, toUser: "bob")
        message.directoryProof.knownTreeSize = knownTreeSize
        guard case .store(.fetchKeys(let request)) = relay.control(message, on: alice).first else {
            XCTFail("no fetch asked", file: file, line: line)
            return DirectoryProof()
        }
        XCTAssertEqual(request.knownTreeSize, knownTreeSize, "the asker's size reaches the store's answer", file: file, line: line)
        let devices = [DeviceKeys(device: "laptop", bundle: bundle, oneTimePrekey: nil)]
        guard case .send(_, let answer) = relay.answer(.fetchKeys(request, devices, known: true, deviceList: deviceList ?? bobList, log: log)).first
        else {
            XCTFail("no answer", file: file, line: line)
            return DirectoryProof()
        }
        return answer.directoryProof
    }

    /// Has `view` check `proof`, fetched with the view's size as the known one.
    private func check(_ proof: DirectoryProof, into view: inout KeyDirectoryView) throws(KeyDirectoryView.Problem) {
        let verdict = try view.checkEntry(
            leafData: bobList, index: proof.logIndex, proof: DirectoryProof.hashes(proof.inclusionProof) ?? [], head: proof.treeHead,
            relayKey: proof.treeKey, consistency: DirectoryProof.hashes(proof.consistencyProof) ?? [], askedAt: view.latest?.size ?? 0)
        XCTAssertEqual(verdict, .proved)
    }

    func testAFetchedListIsProvedInTheSignedLogAndTheLogProvedToGrow() throws {
        var view = KeyDirectoryView()
        var log = KeyLogSnapshot(
            leafHashes: leaves(["a", "b", "c"]) + [KeyLogSnapshot.leafHash(of: bobList)] + leaves(["d"]), listIndex: 3, treeKeySecret: treeKey,
            timestampMillis: 1_000)
        let first = try fetch(knownTreeSize: 0, log: log)
        XCTAssertEqual(first.logIndex, 3)
        XCTAssertEqual(first.treeHead.count, 113)
        XCTAssertEqual(first.inclusionProof.count, 3 * 32)
        try check(first, into: &view)
        XCTAssertEqual(view.latest?.size, 5)

        log.leafHashes += leaves(["e", "f"])
        log.timestampMillis = 2_000
        let second = try fetch(knownTreeSize: 5, log: log)
        XCTAssertFalse(second.consistencyProof.isEmpty)
        try check(second, into: &view)
        XCTAssertEqual(view.latest?.size, 7)
    }

    func testAForkedLogIsRefusedByAClientThatSawTheHonestOne() throws {
        var view = KeyDirectoryView()
        let honest = KeyLogSnapshot(
            leafHashes: leaves(["a", "b"]) + [KeyLogSnapshot.leafHash(of: bobList)], listIndex: 2, treeKeySecret: treeKey, timestampMillis: 1_000)
        try check(try fetch(knownTreeSize: 0, log: honest), into: &view)
        var forked = honest
        forked.leafHashes[1] = KeyLogSnapshot.leafHash(of: Array("b as the operator wrote it".utf8))
        forked.leafHashes += leaves(["c"])
        XCTAssertThrowsError(try check(try fetch(knownTreeSize: 3, log: forked), into: &view)) {
            guard case .forked = $0 as? KeyDirectoryView.Problem else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(view.latest?.size, 3, "the view stays on the log it verified")
    }

    func testNoProofWithoutALogOrWhenTheLogDoesNotHoldTheList() throws {
        XCTAssertEqual(try fetch(knownTreeSize: 0, log: nil), DirectoryProof())
        let elsewhere = KeyLogSnapshot(leafHashes: leaves(["a", "b"]), listIndex: 1, treeKeySecret: treeKey, timestampMillis: 1_000)
        XCTAssertEqual(try fetch(knownTreeSize: 0, log: elsewhere), DirectoryProof(), "leaf 1 is not bob's list")
        let unlogged = KeyLogSnapshot(leafHashes: leaves(["a"]), listIndex: nil, treeKeySecret: treeKey, timestampMillis: 1_000)
        XCTAssertEqual(try fetch(knownTreeSize: 0, log: unlogged), DirectoryProof())
    }
}
