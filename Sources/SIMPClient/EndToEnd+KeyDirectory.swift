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

    /// A KEYS_FETCH of `owner`'s keys naming `members` (no one-time prekey is claimed for them),
    /// with `peerTreeSize` when a peer's checkpoint is to be proved (0: none), whose answers are
    /// judged as `KeyDirectoryFetch` says: `first` is the first answer (its bundles carry the
    /// one-time prekeys handed out), `proved` the answer whose device list may be taken (the
    /// first, or one asked again after stale answers; nil when none may be). A failed first
    /// request fails the future.
    func fetchKeys(of owner: String, members: [String], peerTreeSize: UInt64 = 0, via engine: ClientEngine)
        -> EventLoopFuture<(first: SIMPMessage, proved: SIMPMessage?)>
    {
        let fetch = KeyDirectoryFetch(from: keyDirectory)
        return engine.keysRequest(.keysFetch) {
            $0.toUser = owner
            $0.members = members
            $0.directoryProof.knownTreeSize = fetch.askedAt
            $0.directoryProof.peerTreeSize = peerTreeSize
        }.flatMap { [self] first in
            proved(first, of: owner, peerTreeSize: peerTreeSize, fetch: fetch, via: engine).map { (first, $0) }
        }
    }

    /// Carries out `fetch`'s step for `answer`: takes it, refuses it (told), gives up (logged),
    /// or asks again naming every device the stale answer listed.
    private func proved(_ answer: SIMPMessage, of owner: String, peerTreeSize: UInt64, fetch: KeyDirectoryFetch, via engine: ClientEngine)
        -> EventLoopFuture<SIMPMessage?>
    {
        var fetch = fetch
        switch fetch.answered(judgeDirectoryProof(answer, askedAt: fetch.askedAt), view: keyDirectory) {
        case .take: return engine.eventLoop.makeSucceededFuture(answer)
        case .refuse(let problem):
            tellRefused(problem, of: owner)
            return engine.eventLoop.makeSucceededFuture(nil)
        case .giveUp:
            logger.info("the key directory moved under every answer; the device list waits for the next fetch", metadata: ["user": "\(owner)"])
            return engine.eventLoop.makeSucceededFuture(nil)
        case .askAgain(let known):
            return engine.keysRequest(.keysFetch) {
                $0.toUser = owner
                $0.members = answer.members
                $0.directoryProof.knownTreeSize = known
                $0.directoryProof.peerTreeSize = peerTreeSize
            }.flatMap { [self] fresh in
                proved(fresh, of: owner, peerTreeSize: peerTreeSize, fetch: fetch, via: engine)
            }.recover { [logger] error in
                logger.info("cannot fetch a device list again", metadata: ["user": "\(owner)", "error": "\(error)"])
                return nil
            }
        }
    }

    /// The view's judgement of the proof `answer` carries for its device list, asked with
    /// `askedAt` as the size this device knew (nil: the answer has no list or no proof, as from
    /// a relay that keeps no log). A head the view adopts is kept in the store.
    private func judgeDirectoryProof(_ answer: SIMPMessage, askedAt: UInt64) -> Result<KeyDirectoryView.Verdict, KeyDirectoryView.Problem>? {
        let proof = answer.directoryProof
        guard !answer.deviceList.isEmpty, !proof.treeHead.isEmpty else { return nil }
        var view = keyDirectory
        let judged: Result<KeyDirectoryView.Verdict, KeyDirectoryView.Problem>
        do {
            judged = .success(
                try view.checkEntry(
                    leafData: answer.deviceList, index: proof.logIndex, proof: DirectoryProof.hashes(proof.inclusionProof) ?? [],
                    head: proof.treeHead, relayKey: proof.treeKey, consistency: DirectoryProof.hashes(proof.consistencyProof) ?? [],
                    askedAt: askedAt))
        } catch {
            judged = .failure(error)
        }
        guard view != keyDirectoryCache else { return judged }
        keyDirectoryCache = view
        do {
            try store.save(Self.keyDirectoryName, SecretBytes(view.encoded))
            try store.commit()
        } catch {
            logger.warning("cannot keep the key directory head", metadata: ["error": "\(error)"])
        }
        return judged
    }

    /// Tells the user, once per problem, that the relay's answer for `owner` was refused.
    private func tellRefused(_ problem: KeyDirectoryView.Problem, of owner: String) {
        if case .forked = problem { keyDirectoryForks += 1 }
        if toldOnce.shouldTell(.directoryRefused(user: owner, problem: problem.description)) {
            onNotice(.keyDirectoryRefused(user: owner, reason: problem.description))
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
    /// this device's head and the peer's are on one log, or the relay is showing two (the peer's
    /// must be a prefix of the proved head: a larger one, or a proof that fails, is a fork).
    private func proveGossip(_ checkpoint: DirectoryCheckpoint, of peer: String, via engine: ClientEngine) {
        let known = (try? store.load(Self.ownDevicesName)).flatMap { $0 }.map {
            String(decoding: $0, as: UTF8.self).split(separator: "\n").map(String.init)
        }
        fetchKeys(of: user, members: (known ?? []) + [device], peerTreeSize: checkpoint.size, via: engine).whenComplete { [self] result in
            guard case .success(let answers) = result, let answer = answers.proved, !answer.directoryProof.treeHead.isEmpty,
                let head = try? SignedTreeHead(encoded: answer.directoryProof.treeHead, verifyingWith: answer.directoryProof.treeKey)
            else {
                return logger.info("cannot check a peer's key directory head now", metadata: ["peer": "\(peer)"])
            }
            let proof = DirectoryProof.hashes(answer.directoryProof.peerConsistencyProof) ?? []
            if !KeyDirectoryView.checkGossipProof(older: checkpoint, newer: head.checkpoint, proof: proof) { tellFork(with: peer) }
        }
    }

    private func tellFork(with peer: String) {
        keyDirectoryForks += 1
        logger.error("the relay shows different key directories to this user and another", metadata: ["peer": "\(peer)"])
        if toldOnce.shouldTell(.directoryForked(user: peer)) { onNotice(.keyDirectoryForked(user: peer)) }
    }
}
