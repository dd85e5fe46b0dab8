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

    /// Checks the proof of the device list a KEYS_FETCH answer for `owner` carries, asked with
    /// `askedAt` as the size this device knew: `.proved` (the list may be taken), `.stale` (the
    /// view moved since the request: ask again), or nil (refused, and told). An answer without
    /// a list or without a proof (a relay that keeps no log) is taken as before.
    func checkDirectoryProof(_ answer: SIMPMessage, of owner: String, askedAt: UInt64) -> KeyDirectoryView.Verdict? {
        let proof = answer.directoryProof
        guard !answer.deviceList.isEmpty, !proof.treeHead.isEmpty else { return .proved }
        var view = keyDirectory
        let verdict: KeyDirectoryView.Verdict
        do {
            verdict = try view.checkEntry(
                leafData: answer.deviceList, index: proof.logIndex, proof: DirectoryProof.hashes(proof.inclusionProof) ?? [],
                head: proof.treeHead, relayKey: proof.treeKey, consistency: DirectoryProof.hashes(proof.consistencyProof) ?? [],
                askedAt: askedAt)
        } catch {
            if case .forked = error { keyDirectoryForks += 1 }
            if toldUnusable.insert(owner + " directory " + error.description).inserted {
                onNotice(.keyDirectoryRefused(user: owner, reason: error.description))
            }
            return nil
        }
        guard view != keyDirectoryCache else { return verdict }
        keyDirectoryCache = view
        do {
            try store.save(Self.keyDirectoryName, SecretBytes(view.encoded))
            try store.commit()
        } catch {
            logger.warning("cannot keep the key directory head", metadata: ["error": "\(error)"])
        }
        return verdict
    }

    /// The size to tell the relay this device knows (`knownTreeSize`), kept by the caller to
    /// judge the answer with.
    var knownTreeSize: UInt64 { keyDirectory.latest?.size ?? 0 }

    /// The device list of `owner` that a KEYS_FETCH `answer` (asked at `askedAt`) proves, or nil
    /// when none may be taken. A stale answer (docs/E2E.md §18.4) is asked again for the list
    /// alone, at most `retries` times, naming every device the answer listed as known so that no
    /// one-time prekey is claimed again; the list is taken from the fresh answer.
    func provedDeviceList(in answer: SIMPMessage, of owner: String, askedAt: UInt64, via engine: ClientEngine, retries: Int = 2)
        -> EventLoopFuture<[UInt8]?>
    {
        switch checkDirectoryProof(answer, of: owner, askedAt: askedAt) {
        case .proved: return engine.eventLoop.makeSucceededFuture(answer.deviceList)
        case nil: return engine.eventLoop.makeSucceededFuture(nil)
        case .stale:
            guard retries > 0 else {
                logger.info("the key directory moved under every answer; the device list waits for the next fetch", metadata: ["user": "\(owner)"])
                return engine.eventLoop.makeSucceededFuture(nil)
            }
            let known = knownTreeSize
            return engine.keysRequest(.keysFetch) {
                $0.toUser = owner
                $0.members = answer.members
                $0.directoryProof.knownTreeSize = known
            }.flatMap { [self] fresh in
                provedDeviceList(in: fresh, of: owner, askedAt: known, via: engine, retries: retries - 1)
            }.recover { [logger] error in
                logger.info("cannot fetch a device list again", metadata: ["user": "\(owner)", "error": "\(error)"])
                return nil
            }
        }
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
    private func proveGossip(_ checkpoint: DirectoryCheckpoint, of peer: String, via engine: ClientEngine, retries: Int = 2) {
        let known = (try? store.load(Self.ownDevicesName)).flatMap { $0 }.map {
            String(decoding: $0, as: UTF8.self).split(separator: "\n").map(String.init)
        }
        let askedAt = knownTreeSize
        engine.keysRequest(.keysFetch) { [self] in
            $0.toUser = user
            $0.members = (known ?? []) + [device] // no one-time prekey is claimed for these
            $0.directoryProof.knownTreeSize = askedAt
            $0.directoryProof.peerTreeSize = checkpoint.size
        }.whenComplete { [self] result in
            guard case .success(let answer) = result, !answer.directoryProof.treeHead.isEmpty else {
                return logger.info("cannot check a peer's key directory head now", metadata: ["peer": "\(peer)"])
            }
            let verdict = checkDirectoryProof(answer, of: user, askedAt: askedAt)
            if verdict == .stale, retries > 0 { return proveGossip(checkpoint, of: peer, via: engine, retries: retries - 1) }
            guard verdict == .proved,
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
