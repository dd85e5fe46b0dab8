import NIOCore
import SIMPCore
import SIMPE2E

/// Key transparency (docs/E2E.md §18): every device list a KEYS_FETCH hands out must come with
/// a proof that it is in the relay's signed, append-only key directory log, which must extend
/// what this device saw before (`KeyDirectoryView` decides); the last head it verified travels
/// inside its end-to-end messages, and a peer's is checked against the log the relay shows
/// this device. This is the shell: it asks, stores the view and tells the user.
extension EndToEnd {
    /// The file holding the view (`KeyDirectoryView.encoded`).
    static let keyDirectoryName = "key-directory"

    /// What this device verified of the relay's log (an empty view when nothing yet, or when the
    /// stored one does not decode: the next answer starts it again).
    var keyDirectory: KeyDirectoryView {
        if let keyDirectoryCache { return keyDirectoryCache }
        let view = ((try? store.load(Self.keyDirectoryName)) ?? nil).flatMap { try? KeyDirectoryView(encoded: $0) } ?? KeyDirectoryView()
        keyDirectoryCache = view
        return view
    }

    /// Checks the proof of the device list a KEYS_FETCH answer for `owner` carries; returns
    /// whether the list may be taken. An answer without a list or without a proof (a relay
    /// that keeps no log) is taken as before.
    func checkDirectoryProof(_ answer: SIMPMessage, of owner: String) -> Bool {
        let proof = answer.directoryProof
        guard !answer.deviceList.isEmpty, !proof.treeHead.isEmpty else { return true }
        var view = keyDirectory
        do {
            try view.checkEntry(
                leafData: answer.deviceList, index: proof.logIndex, proof: DirectoryProof.hashes(proof.inclusionProof) ?? [],
                head: proof.treeHead, relayKey: proof.treeKey, consistency: DirectoryProof.hashes(proof.consistencyProof) ?? [])
        } catch {
            if case .forked = error { keyDirectoryForks += 1 }
            if toldUnusable.insert(owner + " directory " + error.description).inserted {
                onNotice(.keyDirectoryRefused(user: owner, reason: error.description))
            }
            return false
        }
        guard view != keyDirectoryCache else { return true }
        keyDirectoryCache = view
        do {
            try store.save(Self.keyDirectoryName, SecretBytes(view.encoded))
            try store.commit()
        } catch {
            logger.warning("cannot keep the key directory head", metadata: ["error": "\(error)"])
        }
        return true
    }

    /// `message` with this device's last verified checkpoint in its end-to-end fields.
    func withDirectoryCheckpoint(_ message: SIMPMessage) -> SIMPMessage {
        guard let checkpoint = keyDirectory.checkpoint else { return message }
        var message = message
        message.directoryProof.directoryCheckpoint = checkpoint.encoded
        return message
    }

    /// Checks the checkpoint `peer` sent end to end: the same size with another root is a
    /// fork at once; another size asks the relay to prove it against the log it shows this
    /// device (through `engine`; without one, as in a unit test, only the first check runs).
    func checkGossip(_ encoded: [UInt8], from peer: String, via engine: ClientEngine?) {
        guard !encoded.isEmpty, let checkpoint = try? DirectoryCheckpoint(encoded: encoded) else { return }
        switch keyDirectory.compare(peer: checkpoint) {
        case .agrees: return
        case .forked: tellFork(with: peer)
        case .needsProof, .noHeadYet:
            guard let engine else { return }
            engine.eventLoop.execute { self.proveGossip(checkpoint, of: peer, via: engine) }
        }
    }

    /// Fetches this user's own keys with `checkpoint`'s size as the peer's: the answer proves
    /// this device's head and the peer's are on one log, or the relay is showing two.
    private func proveGossip(_ checkpoint: DirectoryCheckpoint, of peer: String, via engine: ClientEngine) {
        let known = (try? store.load(Self.ownDevicesName)).flatMap { $0 }.map {
            String(decoding: $0, as: UTF8.self).split(separator: "\n").map(String.init)
        }
        engine.keysRequest(.keysFetch) { [self] in
            $0.toUser = user
            $0.members = (known ?? []) + [device] // no one-time prekey is claimed for these
            $0.directoryProof.knownTreeSize = keyDirectory.latest?.size ?? 0
            $0.directoryProof.peerTreeSize = checkpoint.size
        }.whenComplete { [self] result in
            guard case .success(let answer) = result, !answer.directoryProof.treeHead.isEmpty else {
                return logger.info("cannot check a peer's key directory head now", metadata: ["peer": "\(peer)"])
            }
            guard checkDirectoryProof(answer, of: user),
                let head = try? SignedTreeHead(encoded: answer.directoryProof.treeHead, verifyingWith: answer.directoryProof.treeKey)
            else { return }
            let proof = DirectoryProof.hashes(answer.directoryProof.peerConsistencyProof) ?? []
            let agrees =
                checkpoint.size <= head.size
                ? KeyDirectoryView.checkGossipProof(older: checkpoint, newer: head.checkpoint, proof: proof)
                : KeyDirectoryView.checkGossipProof(older: head.checkpoint, newer: checkpoint, proof: proof)
            if !agrees { tellFork(with: peer) }
        }
    }

    private func tellFork(with peer: String) {
        keyDirectoryForks += 1
        logger.error("the relay shows different key directories to this user and another", metadata: ["peer": "\(peer)"])
        if toldUnusable.insert(peer + " directory fork").inserted { onNotice(.keyDirectoryForked(user: peer)) }
    }
}
