import SIMPClient
import SIMPCore

/// What `simp chat` shows about end-to-end encryption: safety numbers (`/verify`), a peer's
/// new or changed devices, and received lines that came unencrypted.
extension ChatSession {
    /// The client computed the safety numbers with `peer`'s devices (`/verify`): one per
    /// device, then how to compare them.
    public mutating func safetyNumbersAnswered(
        with peer: String, _ answer: Result<[(device: String, number: String)], ChatRoomError>
    ) {
        learnNames(peer)
        switch answer {
        case .failure(let error):
            notice("/verify \(peer): \(error.reason)", .failure)
        case .success(let numbers) where numbers.isEmpty:
            let line = MessageFormatting.safetyNumberLines(user: user, peer: peer, numbers: [])[0]
            notice("/verify \(peer): " + line, .failure)
        case .success(let numbers):
            for line in MessageFormatting.safetyNumberLines(user: user, peer: peer, numbers: numbers) {
                if line.hasPrefix(" ") { notice(line, .bold, prefix: "") } else { notice(line, .plain) }
            }
        }
    }

    /// `/verify NAME --confirm` was carried out: `answer` is how many devices were marked.
    public mutating func verifiedConfirmed(_ peer: String, _ answer: Result<Int, ChatRoomError>) {
        switch answer {
        case .failure(let error): notice("/verify \(peer) --confirm: \(error.reason)", .failure)
        case .success(0): notice("/verify \(peer) --confirm: no keys of \(peer) known yet; /verify \(peer) first", .failure)
        case .success(let devices):
            keyChangedPeers.remove(peer)
            notice("\(peer) is verified (\(devices) device\(devices == 1 ? "" : "s")); you are told if a key changes", .plain)
        }
    }

    /// News from the end-to-end layer, as a line in the conversation.
    public mutating func endToEndNoticed(_ news: EndToEndNotice) {
        if case .verifiedKeyChanged(let peer) = news { keyChangedPeers.insert(peer) }
        let (text, tone) = Self.endToEndLine(news)
        notice(text, tone)
    }

    /// `bob has a new device: laptop-3fa2`, `bob's key changed (device laptop-3fa2): /verify bob`, ….
    static func endToEndLine(_ news: EndToEndNotice) -> (String, Tone) {
        switch news {
        case .peer(.newDevice(let user, let device)):
            return ("\(user) has a new device: \(device)", .warning)
        case .peer(.deviceKeyChanged(let user, let device)):
            return ("\(user)'s key changed (device \(device)): /verify \(user)", .warning)
        case .peer(.sessionRestarted(let user, let device)):
            return ("\(user)'s device \(device) started a new session (its state was lost or restored)", .dim)
        case .undecryptable(let user, let id, let reason):
            return ("message \(id) from \(user) could not be decrypted: \(reason)", .failure)
        case .stateUnwritable:
            return (news.description, .failure)
        case .ownNewDevice, .verifiedKeyChanged, .resent(_, _, _, false), .stateWritableAgain:
            return (news.description, .warning)
        case .askedAgain, .resent, .restoredSessionReplaced:
            return (news.description, .dim)
        }
    }
}

extension HistoryEntry {
    /// The entry for a message this user received; a direct message or room post that did not
    /// come end to end encrypted (`--no-e2e`, or a peer or member without keys) is marked so.
    public init(received message: SIMPMessage) {
        self.init(message)
        if !message.isEndToEnd { unencrypted = true }
    }
}
