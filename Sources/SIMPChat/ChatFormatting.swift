import Foundation
import NIOCore
import SIMPCore

extension HistoryEntry {
    /// The entry for a content message; `id` overrides the message's own (an outgoing
    /// message's id is assigned by the client).
    public init(_ message: SIMPMessage, id: UInt64? = nil) {
        self.init(
            id: id ?? message.messageId, time: message.time, from: message.fromUser, to: message.toUser,
            kind: message.kind == .image ? "image" : message.kind == .audio ? "audio" : "text", text: message.content,
            imageURL: message.kind == .image ? message.imageURL : nil,
            imageScale: message.kind == .image ? message.imageScale : nil)
        if !message.author.isEmpty { author = message.author }
    }

    /// What the message says, images as `[image] URL`, audio as `[audio] URL`.
    var body: StyledText {
        if kind == "audio" { return StyledText("[audio] ") + StyledText(text, .link) }
        if kind == "file", let file { return StyledText(file.label) }
        guard kind == "image", let imageURL else { return StyledText(text) }
        let scale = imageScale.map { $0 == 1 || $0 == 0 ? "" : " (scale \(Self.short($0)))" } ?? ""
        return StyledText("[image] ") + StyledText(imageURL, .link) + StyledText(scale)
    }

    /// An action's text (`/me waves` was typed: the message says `/me waves`), else nil.
    var action: String? {
        guard kind == "text", text.hasPrefix(ChatSession.actionPrefix) else { return nil }
        return String(text.dropFirst(ChatSession.actionPrefix.count))
    }

    /// What the message says, an action as `* ACTOR waves`.
    func body(actor: String) -> StyledText {
        action.map { StyledText("* \(actor) \($0)", .bold) } ?? body
    }

    /// After a received file's label: ` saved to PATH`, or ` (not received)` while the history
    /// knows of no saved copy (its transfer did not finish, or failed).
    var receivedFileOutcome: StyledText {
        guard kind == "file", let file else { return StyledText() }
        return file.path.map { StyledText(" saved to \($0)") } ?? StyledText(" (not received)", .warning)
    }

    private static func short(_ value: Float) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}

extension ChatSession {
    /// How an action (`/me waves`) travels: as the text `/me waves`, which other clients show
    /// as it is and `simp chat` shows as `* alice waves`.
    static let actionPrefix = "/me "

    /// `12:03 bob: hello` (`… hello (not encrypted)` when it did not come end to end encrypted),
    /// or `12:03 you → bob: hello ✓✓` for the user's own messages (with the failure reason after ✗).
    static func messageLine(
        _ entry: HistoryEntry, user: String, clock: ChatClock,
        status: DeliveryStatus? = nil
    ) -> StyledText {
        let time = StyledText(clock.format(entry.time) + " ", .dim)
        guard entry.from == user else {
            // A room post, a file sent in a room (`#team alice`), or a direct message.
            let from = entry.author.map { "\(entry.from) \($0)" } ?? entry.file?.room.map { "#\($0) \(entry.from)" } ?? entry.from
            let unencrypted = StyledText(entry.unencrypted == true ? " (not encrypted)" : "", .warning)
            let keyChanged = StyledText(entry.keyChanged == true ? " (key changed, not verified)" : "", .warning)
            let said: StyledText
            if entry.action != nil {
                let room = entry.author == nil ? StyledText() : StyledText(entry.from + " ", .peer)
                said = room + entry.body(actor: entry.author ?? entry.from)
            } else {
                said = StyledText(from, .peer) + StyledText(": ") + entry.body
            }
            return time + said + entry.receivedFileOutcome + unencrypted + keyChanged
        }
        let line =
            time + StyledText("you", .me) + StyledText(" → ") + StyledText(entry.to, .peer)
            + StyledText(": ") + entry.body(actor: user)
        switch status {
        case nil:
            return line + StyledText(entry.status.map { " " + historyMark($0) } ?? "", .dim)
        case .pending?, .sent?, .stored?, .sentToDevices?, .noOtherMembers?, .transferring?: return line + StyledText(" " + status!.mark, .dim)
        case .roomDelivered(let delivered, let total)?:
            return line + StyledText(" " + status!.mark, delivered == total ? .success : .dim)
        case .delivered?: return line + StyledText(" ✓✓", .success)
        case .read?: return line + StyledText(" ✓✓ read", .success)
        case .failed(let reason)?: return line + StyledText(" ✗ \(reason) (/retry resends)", .failure)
        }
    }

    /// The mark for a status as the history file names it (`delivered 2/3` for room posts).
    static func historyMark(_ name: String) -> String {
        switch name {
        case "delivered": return "✓✓"
        case "read": return "✓✓ read"
        case "failed": return "✗"
        case "retried": return "✗ (resent)"
        case DeliveryStatus.sendingFileName: return "✗ (stopped before the end; /retry goes on)"
        case "stored": return DeliveryStatus.stored.mark
        case "sent to devices": return DeliveryStatus.sentToDevices.mark
        case "no other members": return DeliveryStatus.noOtherMembers.mark
        case "sent": return DeliveryStatus.sent.mark
        case "pending": return DeliveryStatus.pending.mark
        default:
            let counts = name.hasPrefix("delivered ") ? name.dropFirst("delivered ".count).split(separator: "/") : []
            if counts.count == 2, let delivered = Int(counts[0]), let total = Int(counts[1]) {
                return DeliveryStatus.roomDelivered(delivered, of: total).mark
            }
            return "?" // a status this version does not know
        }
    }

    /// A line about a message's outcome when its own line can no longer be changed:
    /// `✓✓ delivered to bob: "hello" (1.2 ms)`.
    static func followUpLine(_ tracked: OutgoingMessage, clock: ChatClock) -> StyledText {
        let message = tracked.message
        let what = message.kind == .image ? message.imageURL : message.content
        let quoted = "\"" + (what.count > 40 ? String(what.prefix(39)) + "…" : what) + "\""
        switch tracked.status {
        case .delivered(let millis):
            return StyledText("✓✓ delivered to \(message.toUser): \(quoted) (\(formatMillis(millis)))", .success)
        case .failed(let reason):
            return StyledText("✗ not delivered to \(message.toUser): \(quoted): \(reason) (/retry resends)", .failure)
        case .read:
            return StyledText("✓✓ read by \(message.toUser): \(quoted)", .success)
        case .stored where RelayCore.isRoomAddress(message.toUser):
            return StyledText("✓ posted to \(message.toUser): \(quoted)", .dim)
        case .stored:
            return StyledText("✓ stored for \(message.toUser) (offline): \(quoted)", .dim)
        case .sentToDevices:
            return StyledText("✓ sent to \(message.toUser)'s devices: \(quoted)", .dim)
        case .noOtherMembers:
            return StyledText("✓ posted to \(message.toUser), where no one else is: \(quoted)", .dim)
        case .pending, .sent, .roomDelivered, .transferring:
            return StyledText("\(tracked.status.mark) \(message.toUser): \(quoted)", .dim)
        }
    }

    static func formatMillis(_ millis: Double) -> String {
        millis < 1000 ? String(format: "%.1f ms", millis) : String(format: "%.2f s", millis / 1000)
    }

    /// `2 s`, `1.5 s`, `250 ms`.
    static func seconds(_ delay: TimeAmount) -> String {
        let millis = delay.nanoseconds / 1_000_000
        if millis < 1000 { return "\(millis) ms" }
        if millis % 1000 == 0 { return "\(millis / 1000) s" }
        return String(format: "%.1f s", Double(millis) / 1000)
    }
}
