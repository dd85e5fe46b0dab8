import XCTest

@testable import SIMPE2E

/// The key directory log's Merkle tree (docs/E2E.md §18): hashes, audit paths and consistency
/// proofs against the vectors of tools/kt_vectors.py (RFC 9162's recursive definitions, written
/// apart from this code), every proof of small trees round-tripping, and altered proofs failing.
final class MerkleTreeTests: XCTestCase {
    /// Leaves "leaf 0" … "leaf 6" (ASCII).
    private let tree = MerkleTree(leafHashes: (0..<7).map { MerkleTree.leafHash(Array("leaf \($0)".utf8)) })

    /// `root_n` of tools/kt_vectors.py: the root of the first n leaves.
    static let roots = [
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "1bb97dcc21635d47e2663efdfd0a174686d98dd701352dd2cd06e8b43fd3d305",
        "fc5f6b88ff8554f75bb2f9e6f39c31b1936d44b69276edf7b1205a955b9761e3",
        "d4f92c8fbb89720eb3b55677c7d7efaddfeb10d11a1a84a0ba8f1a23337faa95",
        "4f631084a157c54f54fcfb23ff5eb8650c4ba160c295bb13a9832b109d52677e",
        "341515982d650e23520dbd54d7fcf0afa1b70cc3a16a411d464dc9c1ac96c301",
        "8363c3821ce41ebb46222116a42cc83dba753984b23cfca26aaad0a6867336ea",
        "5a61fc2b54f9cfa71774f2432143dd40c6cb2b11947faf65a7d3da5cb65199c8",
    ]
    /// `inclusion_i_of_7`: the audit path of leaf i in the tree of 7.
    static let inclusions: [(Int, [String])] = [
        (
            0,
            [
                "cb5a3ce862c3e321f3f7df6d2690549e936a8e377135aae9f3d69f691f547d5b",
                "4f7494071ca382a5c5067cc41077a999fd7722e06a26aa9de771be933dc1021d",
                "01571b557bc70672650d467c7bad8337e09a7f354a72051f23b43a782c0f48e6",
            ]
        ),
        (
            2,
            [
                "58bd1496e1684aac9201c2e687ee7ae4f51c96a8b0d81ef3583628b93d3cd345",
                "fc5f6b88ff8554f75bb2f9e6f39c31b1936d44b69276edf7b1205a955b9761e3",
                "01571b557bc70672650d467c7bad8337e09a7f354a72051f23b43a782c0f48e6",
            ]
        ),
        (
            6,
            ["75ab928268c86f44da5d4241188ed71e4aab2d4d77d6d50117dad94a842ede03", "4f631084a157c54f54fcfb23ff5eb8650c4ba160c295bb13a9832b109d52677e"]
        ),
    ]
    /// `consistency_m_to_7`: the proof from the first m leaves to all 7.
    static let consistencies: [(Int, [String])] = [
        (
            1,
            [
                "cb5a3ce862c3e321f3f7df6d2690549e936a8e377135aae9f3d69f691f547d5b",
                "4f7494071ca382a5c5067cc41077a999fd7722e06a26aa9de771be933dc1021d",
                "01571b557bc70672650d467c7bad8337e09a7f354a72051f23b43a782c0f48e6",
            ]
        ),
        (
            3,
            [
                "ab37ba34d1dfe29015de717a6d5764a8fb029c3a7a0f5b64b93b54351885bf7c",
                "58bd1496e1684aac9201c2e687ee7ae4f51c96a8b0d81ef3583628b93d3cd345",
                "fc5f6b88ff8554f75bb2f9e6f39c31b1936d44b69276edf7b1205a955b9761e3",
                "01571b557bc70672650d467c7bad8337e09a7f354a72051f23b43a782c0f48e6",
            ]
        ),
        (4, ["01571b557bc70672650d467c7bad8337e09a7f354a72051f23b43a782c0f48e6"]),
        (
            6,
            [
                "75ab928268c86f44da5d4241188ed71e4aab2d4d77d6d50117dad94a842ede03",
                "fb7f869ce8b7b51fdf719fc8c21a4736c98cc160a825606a81f78a7f4d2261d9",
                "4f631084a157c54f54fcfb23ff5eb8650c4ba160c295bb13a9832b109d52677e",
            ]
        ),
    ]
    static let relayTreeKey = "3f7708d5f5cc2bc633b59d2b3a2ed92e7479220c6f08ade208bebcd8580ab93b"
    static let treeHead =
        "0100000000000000075a61fc2b54f9cfa71774f2432143dd40c6cb2b11947faf65a7d3da5cb65199c80000018bcfe568002aa2b82afd70d24621d77d7d7cc646b2ee29d11ad78d25771fedd7e4b000059a71218c71959b206c347593f7c4c6b605a67405151e1e6e15e83d4392e9e1150b"
    static let checkpoint = "00000000000000075a61fc2b54f9cfa71774f2432143dd40c6cb2b11947faf65a7d3da5cb65199c8"

    func testRootsMatchTheDocumentedVectors() {
        for size in 0...7 { XCTAssertEqual(hex(tree.root(atSize: size)), Self.roots[size], "root of \(size) leaves") }
        XCTAssertEqual(hex(tree.root), Self.roots[7])
    }

    func testInclusionProofsMatchTheVectorsAndVerify() throws {
        for (index, expected) in Self.inclusions {
            let proof = try XCTUnwrap(tree.inclusionProof(index: index, size: 7))
            XCTAssertEqual(proof.map(hex), expected, "leaf \(index)")
            XCTAssertTrue(
                MerkleTree.verifyInclusion(
                    leafHash: MerkleTree.leafHash(Array("leaf \(index)".utf8)), index: index, size: 7,
                    proof: expected.map { bytes(hex: $0) }, root: bytes(hex: Self.roots[7])))
        }
    }

    func testConsistencyProofsMatchTheVectorsAndVerify() throws {
        for (old, expected) in Self.consistencies {
            let proof = try XCTUnwrap(tree.consistencyProof(oldSize: old, newSize: 7))
            XCTAssertEqual(proof.map(hex), expected, "from \(old)")
            XCTAssertTrue(
                MerkleTree.verifyConsistency(
                    oldSize: old, oldRoot: bytes(hex: Self.roots[old]), newSize: 7, newRoot: bytes(hex: Self.roots[7]),
                    proof: expected.map { bytes(hex: $0) }))
        }
    }

    func testEveryProofOfTreesUpTo17LeavesVerifiesAndAnyAlteredOneFails() throws {
        let big = MerkleTree(leafHashes: (0..<17).map { MerkleTree.leafHash([UInt8($0)]) })
        for size in 1...17 {
            let root = big.root(atSize: size)
            for index in 0..<size {
                let proof = try XCTUnwrap(big.inclusionProof(index: index, size: size))
                let leaf = big.leafHashes[index]
                XCTAssertTrue(MerkleTree.verifyInclusion(leafHash: leaf, index: index, size: size, proof: proof, root: root))
                XCTAssertFalse(
                    MerkleTree.verifyInclusion(leafHash: MerkleTree.leafHash([99]), index: index, size: size, proof: proof, root: root),
                    "another leaf")
                if size > 1 {
                    XCTAssertFalse(
                        MerkleTree.verifyInclusion(leafHash: leaf, index: (index + 1) % size, size: size, proof: proof, root: root),
                        "another index (\(index) of \(size))")
                }
                for position in proof.indices {
                    var altered = proof
                    altered[position][0] ^= 1
                    XCTAssertFalse(MerkleTree.verifyInclusion(leafHash: leaf, index: index, size: size, proof: altered, root: root))
                }
                XCTAssertFalse(MerkleTree.verifyInclusion(leafHash: leaf, index: index, size: size, proof: proof + [root], root: root), "too long")
            }
            for old in 1...size {
                let proof = try XCTUnwrap(big.consistencyProof(oldSize: old, newSize: size))
                let oldRoot = big.root(atSize: old)
                XCTAssertTrue(MerkleTree.verifyConsistency(oldSize: old, oldRoot: oldRoot, newSize: size, newRoot: root, proof: proof))
                for position in proof.indices {
                    var altered = proof
                    altered[position][31] ^= 0x80
                    XCTAssertFalse(
                        MerkleTree.verifyConsistency(oldSize: old, oldRoot: oldRoot, newSize: size, newRoot: root, proof: altered),
                        "\(old) to \(size), element \(position) altered")
                }
                if old < size {
                    XCTAssertFalse(
                        MerkleTree.verifyConsistency(oldSize: old, oldRoot: MerkleTree.leafHash([7, 7]), newSize: size, newRoot: root, proof: proof),
                        "another old root (a fork)")
                    XCTAssertFalse(
                        MerkleTree.verifyConsistency(oldSize: old, oldRoot: oldRoot, newSize: size, newRoot: root, proof: []), "no proof")
                }
            }
        }
    }

    func testAForkedLogOfTheSameSizeCannotBeProvedConsistent() throws {
        var honest = tree
        var forked = tree
        honest.append(leafData: Array("bob's list".utf8))
        forked.append(leafData: Array("bob's list as the operator wrote it".utf8))
        XCTAssertNotEqual(honest.root, forked.root)
        honest.append(leafData: [1])
        let proof = try XCTUnwrap(honest.consistencyProof(oldSize: 8, newSize: 9))
        XCTAssertFalse(MerkleTree.verifyConsistency(oldSize: 8, oldRoot: forked.root, newSize: 9, newRoot: honest.root, proof: proof))
    }

    func testTheDocumentedTreeHeadVerifiesAndIsAsDocumented() throws {
        let head = try SignedTreeHead(encoded: bytes(hex: Self.treeHead), verifyingWith: bytes(hex: Self.relayTreeKey))
        XCTAssertEqual(head.size, 7)
        XCTAssertEqual(hex(head.root), Self.roots[7])
        XCTAssertEqual(head.timestampMillis, 1_700_000_000_000)
        XCTAssertEqual(hex(head.checkpoint.encoded), Self.checkpoint)
        XCTAssertEqual(try DirectoryCheckpoint(encoded: bytes(hex: Self.checkpoint)), head.checkpoint)
        // The same key signs the same bytes (Ed25519 is deterministic).
        let key = try TreeHeadSigningKey(secretBytes: [1] + (0..<32).map { UInt8(0x50 + $0) })
        XCTAssertEqual(hex(key.publicKey), Self.relayTreeKey)
        let signed = try SignedTreeHead.signed(size: 7, root: head.root, timestampMillis: 1_700_000_000_000, by: key)
        XCTAssertEqual(hex(signed.encoded), Self.treeHead)
        var altered = bytes(hex: Self.treeHead)
        altered[8] ^= 1
        XCTAssertThrowsError(try SignedTreeHead(encoded: altered, verifyingWith: key.publicKey)) {
            XCTAssertEqual($0 as? E2EError, .authenticationFailed)
        }
    }
}
