import NIOCore
import SIMPCommandLine
import SIMPCore
import SIMPNIO

/// Connecting to a relay: each configured relay in turn, the login, failover and reconnecting.
extension ClientEngine {
    /// Tries each configured relay once, in turn, until one accepts; says which failed and
    /// why before trying the next. When none could be reached (refused, timed out) the error
    /// names each with its reason; any other failure (a refused login) is the last one's.
    func connectAnyRelay() -> EventLoopFuture<Void> {
        var unreachable: [String] = []
        func attempt(_ remaining: Int) -> EventLoopFuture<Void> {
            let tried = server
            return connectControl().assumeIsolated().flatMapError { [self] error in
                let failure = Self.unreachable(tried, error)
                if let failure { unreachable.append(failure) }
                guard remaining > 1, !closedByUser else {
                    guard failure != nil, unreachable.count > 1 else { return eventLoop.makeFailedFuture(error) }
                    return eventLoop.makeFailedFuture(SIMPClientError.cannotConnect(unreachable.joined(separator: " nor ")))
                }
                nextServer(after: error)
                logger.warning("cannot reach relay \(failure ?? "\(tried) (\(error))"); trying \(server)")
                return attempt(remaining - 1)
            }.nonisolated()
        }
        return attempt(configuration.servers.count)
    }

    /// `HOST:PORT (why)` for a relay that could not be reached (the connection failed, or the
    /// login got no answer in time); nil for any other failure.
    static func unreachable(_ relay: RelayEndpoint, _ error: Error) -> String? {
        switch error as? SIMPClientError {
        case .cannotConnect(let relayAndReason): return relayAndReason
        case .timedOut(let what): return "\(relay) (timed out \(what))"
        default: return nil
        }
    }

    /// Moves on to the next configured relay (failover).
    func nextServer(after error: Error?) {
        guard configuration.servers.count > 1 else { return }
        let previous = server
        serverIndex = (serverIndex + 1) % configuration.servers.count
        logger.info(
            "trying the next relay",
            metadata: ["failed": "\(previous)", "next": "\(server)", "error": "\(error.map { "\($0)" } ?? "connection lost")"])
    }

    /// Opens a control connection to the current relay, logs in and registers; on CONNECTED,
    /// resumes sending.
    func connectControl() -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: (SIMPMessage, ClientSession.Output).self)
        handshake = (nil, promise)
        if tlsContext == nil, !warnedWithoutTLS, !ClientTLS.isLoopback(server.host) {
            warnedWithoutTLS = true
            logger.warning(
                "connecting to \(server) without TLS: the login and control frames cross the network in clear (use --tls, with --ca if the relay's certificate is not from a public CA)"
            )
        }
        environment.connect(server, eventLoop) { [self, server] channel in
            channel.eventLoop.makeCompletedFuture {
                if let tlsContext { try channel.pipeline.syncOperations.addHandler(ClientTLS.handler(tlsContext, host: server.host)) }
                try channel.pipeline.syncOperations.addSIMPControlHandlers(
                    maxFrameSize: configuration.maxFrameSize, ClientControlHandler(engine: self))
            }
        }.whenComplete { [self, server] result in
            switch result {
            case .failure(let error):
                promise.fail(SIMPClientError.cannotConnect("\(server) (\(SocketErrorText.reason(error)))"))
            case .success(let channel):
                handshake?.channel = channel
                let udpPort = configuration.advertisedUDPPort ?? datagrams?.localAddress?.port ?? 0
                fetchToken().assumeIsolated().whenComplete { [self] token in
                    switch token {
                    case .success(let token): channel.writeAndFlush(session.beginLogin(udpPort: udpPort, token: token), promise: nil)
                    case .failure(let error): promise.fail(SIMPClientError.rejected(.tokenRefused, "\(error)"))
                    }
                }
                schedule(in: configuration.connectTimeout) {
                    promise.fail(SIMPClientError.timedOut("waiting for the relay to accept the login"))
                }
            }
        }
        return promise.futureResult.flatMapErrorThrowing { [self] error in
            handshake?.channel?.close(promise: nil)
            handshake = nil
            throw error
        }.map { [self] accepted, output in adopt(accepted, output) }
    }

    func adopt(_ accepted: SIMPMessage, _ output: ClientSession.Output) {
        guard let channel = handshake?.channel else { return }
        handshake = nil
        control = channel
        relayId = accepted.relayId
        var relayUDP = channel.remoteAddress!
        relayUDP.port = Int(accepted.udpPort)
        relayDatagramAddress = configuration.datagramTarget ?? relayUDP
        logger.debug("connected", metadata: ["relay": "\(accepted.relayId)", "udp": "\(relayDatagramAddress!)"])
        onStateChange(.connected(relayId: accepted.relayId))
        if accepted.tokenExpires > 0 { tokenSessionStarted(expires: accepted.tokenExpires) }
        carryOut(output)
        sealHeldMessages()
        endToEnd?.loggedInAgain(via: self)
    }

    /// Connects again after `delay` (the session's backoff), unless the user closed meanwhile.
    package func reconnect(attempt: Int, after delay: TimeAmount) {
        onStateChange(.reconnecting(attempt: attempt, delay: delay))
        schedule(in: delay) { [self] in
            guard !closedByUser else { return }
            connectOrRetry(attempt: attempt)
        }
    }

    /// Connects to the current relay; a failed attempt goes to the session, which plans the
    /// next one (`ClientSession.connectAttemptFailed`) unless the login was refused.
    package func connectOrRetry(attempt: Int = 0) {
        connectControl().whenFailure { [self] error in
            logger.debug("connect attempt failed", metadata: ["attempt": "\(attempt)", "error": "\(error)"])
            guard !closedByUser else { return }
            carryOut(session.connectAttemptFailed(random: environment.random()))
            if case .loginRefused(let reason)? = session.stopped {
                let why = reason.hasPrefix("login failed: ") ? String(reason.dropFirst("login failed: ".count)) : reason
                return stop(because: "login refused: \(why); not reconnecting")
            }
            nextServer(after: error)
        }
    }

    /// The user asks to connect again after the session stopped for good (the core decides:
    /// `ClientSession.resumeAfterStop`); returns false when it had not stopped.
    func connectAgain() -> Bool {
        guard !closedByUser, session.resumeAfterStop() else { return false }
        onStateChange(.connecting)
        connectOrRetry()
        return true
    }
}

/// A client's reliability counters.
public struct ClientStatistics: Sendable, Equatable {
    public var retransmits: Int
    public var spuriousRetransmits: Int
    /// Datagrams sent beyond one per transmission (retransmissions go out in two copies).
    public var extraCopies: Int
    public var duplicatesSuppressed: Int
    public var smoothedRTT: TimeAmount?
    public var rto: TimeAmount
    public var inFlight: Int
    /// Times the datagrams moved to the control connection or back to UDP (docs/PROTOCOL.md §5.5).
    public var pathSwitches = 0
}
