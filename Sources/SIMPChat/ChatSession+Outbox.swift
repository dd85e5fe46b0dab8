import SIMPCore

/// Messages that outlive the session: resent from the outbox at start, kept there at `/quit`,
/// and failures from earlier sessions that `/retry` resends.
extension ChatSession {
    /// Resends what an earlier session left in the outbox (`messages`, with their original ids
    /// and times): says so, shows each with its live mark, and asks the controller to submit
    /// them (`.send` with the id already set).
    /// A message sealed end to end before it was kept is shown with its text from the history;
    /// one the history does not have is a frame of the end-to-end layer (a request to send a
    /// message again, a room's sender key): resubmitted as it is (`.resubmit`), neither shown
    /// nor counted nor recorded.
    public mutating func resend(_ messages: [SIMPMessage]) -> [ChatEffect] {
        var effects: [ChatEffect] = []
        var shown: [(sent: SIMPMessage, readable: SIMPMessage)] = []
        for message in messages {
            var message = message
            message.fromUser = user
            guard message.isEndToEnd else {
                shown.append((message, message))
                continue
            }
            guard let entry = history.last(where: { $0.id == message.messageId && $0.from == user }) else {
                effects.append(.resubmit(message))
                continue
            }
            var readable = entry.message // as typed, for the screen and `/retry`
            readable.messageId = message.messageId
            readable.fromUser = user
            readable.time = message.time
            shown.append((message, readable))
        }
        guard !shown.isEmpty else { return effects }
        let many = shown.count > 1
        notice("\(shown.count) message\(many ? "s" : "") from your last session \(many ? "are" : "is") being resent", .warning)
        for (sent, readable) in shown {
            let ref = outgoing.add(readable) // its id is taken when the client has it (`submitted`)
            if screen.interactive { showStatus(of: ref) }
            effects.append(.send(ref: ref, sent))
        }
        return effects
    }

    /// `/quit`, Ctrl-C or Ctrl-D: with messages not yet delivered (on a terminal), says they
    /// stay in the outbox and asks for the command once more; otherwise leaves.
    mutating func quitAsking() -> [ChatEffect] {
        let waiting = outgoing.unresolvedCount
        guard screen.interactive, waiting > 0, !quitWarned else { return quit(status: 0) }
        quitWarned = true
        let files = outgoing.messages.filter { $0.file != nil && !$0.status.isFinal }.count
        if files > 0 { // files are not in the outbox
            let many = files > 1
            notice(
                "\(files) file\(many ? "s" : "") still being sent; /quit again to stop \(many ? "them" : "it") "
                    + "(/retry in a later chat, or the same /file to the same person, goes on where it stopped)", .warning)
            return []
        }
        let many = waiting > 1
        let after =
            undeliveredAreLostAtExit
            ? "those the outbox could not keep are lost (listed when you leave)" : "\(many ? "they" : "it") will be sent next time"
        notice("\(waiting) message\(many ? "s" : "") not yet delivered; /quit again to leave, " + after, .warning)
        return []
    }

    /// `/retry`: resends (as new messages) what failed in this session and, from the history,
    /// what failed in earlier ones, files too (and files an earlier session stopped before the
    /// end); the failed entries are recorded as `retried` so they are offered once.
    mutating func retryFailures() -> [ChatEffect] {
        var effects: [ChatEffect] = []
        var messages: [SIMPMessage] = []
        var files: [ChatEffect] = []
        for failed in outgoing.takeFailures() {
            if let file = failed.file {
                files.append(.checkFile(path: file.path, to: failed.message.toUser, image: file.image != nil))
                if let id = failed.historyId { effects += markRetried(id) }
                continue
            }
            messages.append(failed.message)
            if let id = failed.messageId { effects += markRetried(id) }
        }
        let current = Set(outgoing.messages.compactMap { $0.messageId ?? $0.historyId })
        for index in history.indices where history[index].from == user && !current.contains(history[index].id) {
            if let file = history[index].fileToRetry {
                files.append(file)
            } else if history[index].kind != "file", history[index].status == "failed" {
                messages.append(history[index].message)
            } else {
                continue
            }
            effects += markRetried(history[index].id)
        }
        if messages.isEmpty, files.isEmpty { notice("nothing to retry: no message failed", .dim) }
        return effects + messages.flatMap { send($0) } + files
    }

    private mutating func markRetried(_ id: UInt64) -> [ChatEffect] {
        if let index = history.lastIndex(where: { $0.id == id }) { history[index].status = Self.retriedStatus }
        return [.recordStatus(messageId: id, status: Self.retriedStatus)]
    }

    /// The history's status of a failed message that `/retry` resent (as a new message).
    static let retriedStatus = "retried"
}

extension HistoryEntry {
    /// The message this entry records, to send again (without its id).
    var message: SIMPMessage {
        switch kind {
        case "image":
            var message = SIMPMessage(kind: .image, toUser: to)
            message.imageURL = imageURL ?? ""
            message.imageScale = imageScale ?? 1
            return message
        case "audio": return SIMPMessage(kind: .audio, toUser: to, content: text)
        default: return SIMPMessage(kind: .text, toUser: to, content: text)
        }
    }
}
