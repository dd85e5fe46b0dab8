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

    /// `/verify NAME --accept` was carried out: `answer` is whether NAME was verified.
    public mutating func keyChangeAccepted(_ peer: String, _ answer: Result<Bool, ChatRoomError>) {
        switch answer {
        case .failure(let error): notice("/verify \(peer) --accept: \(error.reason)", .failure)
        case .success(let wasVerified):
            keyChangedPeers.remove(peer)
            let what = wasVerified ? "\(peer)'s new keys are accepted; \(peer) is no longer verified" : "\(peer) was not verified"
            notice(what + ": messages to \(peer) go (/retry sends those refused); /verify \(peer) to compare the safety numbers", .plain)
        }
    }

    /// News from the end-to-end layer, as a line in the conversation. A message asked for or
    /// sent again after a new session is counted on one line per peer device (rewritten in
    /// place while on screen), never a line per message id. A peer's new device is said above
    /// the line of the message just sealed for it.
    public mutating func endToEndNoticed(_ news: EndToEndNotice) {
        if case .verifiedKeyChanged(let peer) = news { keyChangedPeers.insert(peer) }
        if let (key, text) = Self.recoveryCounting(news) { return countRecovery(key, text) }
        let (text, tone) = Self.endToEndLine(news)
        if case .peer(.newDevice(let peer, _)) = news, let row = rowOfMessageBeingSealed(for: peer) {
            return insert(StyledText("-- " + text, tone), before: row)
        }
        notice(text, tone)
    }

    /// The line of the message to `peer` most likely being sealed now: the first one typed in
    /// the last seconds that has no id yet, else the newest one typed then, if unsettled.
    private func rowOfMessageBeingSealed(for peer: String) -> Screen.Row? {
        let recent = outgoing.messages.filter {
            $0.message.toUser == peer && $0.row != nil && !$0.status.isFinal && clock.now() - $0.message.time < Self.sealingWindow
        }
        return (recent.first { $0.messageId == nil } ?? recent.last)?.row
    }

    /// How long after it was typed a message's line may still get a notice put above it (ms).
    static let sealingWindow: Int64 = 10_000

    /// Puts `line` above the line at `row` (the rows below move down one).
    private mutating func insert(_ line: StyledText, before row: Screen.Row) {
        guard let inserted = screen.insert(line, before: row, input: inputLine) else { return printLine(line) }
        output += inserted
        outgoing.shiftRows(from: row)
        for key in recoveryLines.keys where recoveryLines[key]!.row >= row { recoveryLines[key]!.row += 1 }
    }

    /// The line that counts messages asked for or sent again with one peer device: a new
    /// line, or the one on screen rewritten with the count one higher.
    private mutating func countRecovery(_ key: String, _ text: (Int) -> String) {
        if let line = recoveryLines[key] {
            let rewritten = StyledText("-- " + text(line.count + 1), .dim)
            if let bytes = screen.rewrite(row: line.row, with: rewritten, input: inputLine) {
                output += bytes
                recoveryLines[key]!.count += 1
                return
            }
        }
        let (printed, row) = screen.print(StyledText("-- " + text(1), .dim), input: inputLine)
        output += printed
        recoveryLines[key] = RecoveryLine(row: row, count: 1)
    }

    /// For news counted per peer device: its key and its text for a count.
    static func recoveryCounting(_ news: EndToEndNotice) -> (String, (Int) -> String)? {
        func messages(_ count: Int) -> String { count == 1 ? "1 message" : "\(count) messages" }
        switch news {
        case .askedAgain(let user, let device, _):
            return (
                "asked \(user)/\(device)",
                { "\(messages($0)) from \(user) (device \(device)) could not be decrypted here; asked for \($0 == 1 ? "it" : "them") again" }
            )
        case .resent(let user, let device, _, true):
            return (
                "resent \(user)/\(device)",
                { "\(user)'s device \(device) started a new session; \(messages($0)) \($0 == 1 ? "was" : "were") sent again" }
            )
        case .resent(let user, let device, _, false):
            return (
                "lost \(user)/\(device)",
                { "\(user)'s device \(device) could not read \(messages($0)) from you, no longer kept here to send again" }
            )
        default: return nil
        }
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
        case .undecryptable(let user, _, let reason):
            return ("a message from \(user) could not be decrypted: \(reason)", .failure)
        case .stateUnwritable:
            return (news.description, .failure)
        case .roomJoinNotAdmitted(let user, let room):
            return ("\(user) joined #\(room) by name and cannot read it; /admit \(user) #\(room) to let \(user) read", .warning)
        case .roomAdmitted(let user, let room, let by):
            return ("\(user) was admitted to #\(room) by \(by); \(user) reads the posts from the next one", .dim)
        case .ownNewDevice, .verifiedKeyChanged, .resent(_, _, _, false), .stateWritableAgain, .safetyNumberChanged, .unusableKeys, .noUsableKeys,
            .resendRefused, .unapprovedDevice, .userKeyChanged, .deviceListWithdrawn, .ownDeviceNotApproved, .keyDirectoryRefused:
            return (news.description, .warning)
        case .keyDirectoryForked:
            return (news.description, .failure)
        case .askedAgain, .resent, .restoredSessionReplaced, .waitingForFirstLogin:
            return (news.description, .dim)
        }
    }
}

/// A line that counts messages asked for or sent again with one peer device.
struct RecoveryLine: Sendable {
    var row: Screen.Row
    var count: Int
}
