import NIOCore

/// File datagrams (docs/PROTOCOL.md §5.6): FILE_CHUNK and FILE_ACK are forwarded like TYPING,
/// at most once and never stored, to every receiving session of the recipient (here, on its
/// relay, or here and on the other relays it is known to have sessions on), and their payload
/// is never read beyond the routing header: the chunks are sealed end to end with a key the
/// relay never sees. FILE_UPLOAD and FILE_FETCH, for a receiver that is
/// offline, are the relay's own (`RelayCore+HeldFiles`).
extension RelayCore {
    /// Checks an authentic file datagram of `user`'s session `session` and forwards it. Its
    /// user's file budget (`Configuration.fileLimit`) is its own, apart from the message rate,
    /// so a transfer neither starves chat nor bypasses a limit; a datagram over it is dropped
    /// and counted, which the sender's congestion control takes as a loss.
    mutating func routeFileDatagram(
        _ payload: ByteBuffer, _ header: DatagramHeader, from user: String, session: UInt64, now: NIODeadline, into output: inout [RelayAction]
    ) {
        guard header.version == SIMPMessage.currentVersion else {
            return output.append(.reject(.unsupportedVersion, detail: "\(header.kind) datagram version \(header.version) from \(user)"))
        }
        guard header.fromUser == user else {
            return output.append(.reject(.senderMismatch, detail: "\(user)'s session sent a \(header.kind) from \"\(header.fromUser)\""))
        }
        guard !header.toUser.isEmpty, !Self.isRoomAddress(header.toUser) else {
            return output.append(.reject(.missingField, detail: "\(header.kind) from \(user) without a user to go to"))
        }
        if fileRates.admit(user, now: now) != nil {
            return output.append(.reject(.fileRateLimited, detail: "\(user)"))
        }
        switch header.kind {
        case .fileUpload: return holdUpload(payload, from: user, session: session, into: &output)
        case .fileFetch: return fetchHeld(payload, from: user, session: session, into: &output)
        case .fileGrant: return grantHeld(payload, from: user, session: session, now: now, into: &output)
        default: break
        }
        // Chunks go to receiving sessions; acknowledgements to every session, since a file's
        // sender may be a send-only session (`simp send --file`).
        sendFileDatagram(payload, to: header.toUser, receiversOnly: header.kind == .fileChunk, sender: session, now: now, into: &output)
    }

    /// `payload`, a file datagram for `user`, to the user's sessions here (only the receiving
    /// ones if `receiversOnly`, and then also to the other relays where it has receiving
    /// sessions: a user with devices on several relays gets a file live on each); with no such
    /// session here, to the user's relay (`routeRemote`).
    mutating func sendFileDatagram(
        _ payload: ByteBuffer, to user: String, receiversOnly: Bool, sender: UInt64? = nil, now: NIODeadline, into output: inout [RelayAction]
    ) {
        guard receiversOnly ? sessions.hasReceiver(user) : sessions.contains(user) else {
            return routeRemote(.datagram(payload), to: user, sender: sender, now: now, into: &output)
        }
        sessions.sealForEverySession(payload, to: user, receiversOnly: receiversOnly, into: &output)
        if receiversOnly, sessions.isElsewhere(user) { sendToReceiversElsewhere(payload, to: user, now: now, into: &output) }
    }
}
