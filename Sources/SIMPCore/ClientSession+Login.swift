import NIOCore

/// Logging in (docs/PROTOCOL.md §4.2, §4.7): AUTH, the relay's CHALLENGE answered with CONNECT,
/// and the CONNECTED that makes the connection the registered control connection.
extension ClientSession {
    /// How a login goes on after a frame from the relay.
    public enum LoginStep: Sendable {
        /// Send this frame on the connection that is logging in.
        case send(SIMPMessage)
        /// Logged in: the connection is now the registered control connection; `connected` is
        /// the relay's CONNECTED, `output` what to do now.
        case registered(connected: SIMPMessage, output: Output)
        /// The relay refused, or could not prove itself: close the connection.
        case refused(code: SIMPMessage.ErrorCode, reason: String)
    }

    /// A control connection is open: the AUTH frame that starts logging in. `udpPort` is the
    /// port CONNECT will register. With an access `token`, the first frame is a CONNECT that
    /// carries it instead (docs/PROTOCOL.md §4.9); the relay's CONNECTED holds the session secret.
    public mutating func beginLogin(udpPort: Int, token: String? = nil) -> SIMPMessage {
        if let token {
            phase = .loggingIn(LoginAttempt(clientNonce: [], udpPort: udpPort))
            var connect = SIMPMessage(kind: .connect, fromUser: configuration.user)
            connect.udpPort = UInt32(udpPort)
            connect.acceptsBatchReceipts = true
            connect.token = token
            return namingDevice(connect)
        }
        let (auth, nonce) = login.start()
        phase = .loggingIn(LoginAttempt(clientNonce: nonce, udpPort: udpPort))
        return namingDevice(auth)
    }

    /// A TOKEN_REFRESH frame giving the registered session the new access `token`; its answer
    /// (or ERROR) carries the frame's id.
    public mutating func tokenRefresh(_ token: String) -> SIMPMessage {
        var refresh = SIMPMessage(kind: .tokenRefresh, messageId: nextRequestId, fromUser: configuration.user)
        refresh.token = token
        nextRequestId += 1
        return refresh
    }

    /// `frame` (AUTH or CONNECT) naming the configured device; CONNECT also says whether the
    /// session only sends, and whether the user turned presence off.
    private func namingDevice(_ frame: SIMPMessage) -> SIMPMessage {
        var frame = frame
        frame.device = configuration.device
        if frame.kind == .connect {
            frame.sendOnly = configuration.sendOnly
            frame.hidePresence = configuration.hidePresence
        }
        return frame
    }

    /// A frame arrived on the connection that is logging in.
    public mutating func loginReceived(_ message: SIMPMessage, now: NIODeadline) -> LoginStep? {
        guard case .loggingIn(var pending) = phase else { return nil }
        switch message.kind {
        case .challenge:
            do {
                let answer = try login.answer(message, clientNonce: pending.clientNonce, udpPort: pending.udpPort)
                pending.transcript = answer.transcript
                phase = .loggingIn(pending)
                return .send(namingDevice(answer.frame))
            } catch {
                phase = .disconnected
                return .refused(code: .authFailed, reason: error.description)
            }
        case .connected:
            phase = .disconnected
            maxDatagramSize = message.maxDatagramSize > 0 ? Int(message.maxDatagramSize) : SealedDatagram.defaultMaxDatagramSize
            if let configured = configuration.pacing { // at 90 % of the rate the relay announced, if it did
                sender.pace(under: SendPacer.limit(announced: message.messageRateLimit, otherwise: configured), now: now)
            }
            guard pending.transcript != nil || message.sessionSecret.count == 32 else {
                return .refused(code: .authFailed, reason: LoginClient.Failure.relayNotAuthentic.description)
            }
            do {
                let keys = try login.accept(message, transcript: pending.transcript)
                return .registered(connected: message, output: registered(keys: keys, now: now, relayBatchesReceipts: message.batchReceipts))
            } catch {
                return .refused(code: .authFailed, reason: error.description)
            }
        case .error:
            phase = .disconnected
            if [.authFailed, .limitReached].contains(message.errorCode) || message.errorCode.refusesToken {
                stopped = .loginRefused(reason: message.errorText) // the same password, token or device cannot succeed
            }
            return .refused(code: message.errorCode, reason: message.errorText)
        default:
            return nil
        }
    }

    /// The relay accepted the login: seal with the new session's keys, say HELLO, start the
    /// heartbeat and keepalive, reset the backoff, and send everything unreceipted and waiting.
    /// `relayBatchesReceipts`: the CONNECTED said the relay routes batch receipts.
    public mutating func registered(keys: SessionKeys, now: NIODeadline, relayBatchesReceipts: Bool = false) -> Output {
        self.relayBatchesReceipts = relayBatchesReceipts
        sealer = DatagramSealer(keys: keys, direction: .uplink)
        opener = DatagramOpener(keys: keys, direction: .downlink)
        phase = .registered(
            RegisteredState(
                heartbeat: Heartbeat(policy: configuration.heartbeat, now: now),
                holdingHeartbeat: Heartbeat(policy: configuration.heartbeatWhileHolding, now: now),
                nextKeepalive: now + configuration.keepaliveInterval,
                nextHello: datagramPath == .udp ? Hello(due: now, attemptsLeft: configuration.helloAttempts) : nil))
        backoff?.reset()
        var output = pollHello(now: now)
        beginDatagramPath(now: now, into: &output)
        for receipt in receipts.takeOwed() { writeReceipt(receipt, now: now, into: &output) }
        output.absorb(sender.resume(now: now))
        receiver.restartHoldClock(now: now)
        return output
    }
}
