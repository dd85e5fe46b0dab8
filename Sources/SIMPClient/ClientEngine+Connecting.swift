import NIOCore
import SIMPCommandLine
import SIMPCore
import SIMPNIO

/// Connecting to a relay: each configured relay in turn, the login, failover and reconnecting,
/// as the session's `ConnectionLifecycle` decides (`ClientSession+Lifecycle`); here they are
/// carried out.
extension ClientEngine {
    /// Tries each configured relay once, in turn, until one accepts; says which failed and
    /// why before trying the next (`ConnectionLifecycle.firstConnectFailed` decides).
    func connectAnyRelay() -> EventLoopFuture<Void> {
        session.lifecycle.firstConnectStarted()
        func attempt() -> EventLoopFuture<Void> {
            let tried = server
            return connectControl().assumeIsolated().flatMapError { [self] error in
                switch session.lifecycle.firstConnectFailed(Self.lifecycleFailure(error)) {
                case .tryNext(_, let unreachable):
                    logNextServer(after: error)
                    logger.warning("cannot reach relay \(unreachable ?? "\(tried) (\(error))"); trying \(server)")
                    return attempt()
                case .fail(let unreachable?):
                    return eventLoop.makeFailedFuture(SIMPClientError.cannotConnect(unreachable.joined(separator: " nor ")))
                case .fail(nil):
                    return eventLoop.makeFailedFuture(error)
                }
            }.map { [self] in session.lifecycle.firstConnectEnded() }.nonisolated()
        }
        return attempt()
    }

    /// What `error` of a connect attempt is to the lifecycle: a relay that could not be
    /// reached, a login that got no answer in time, or anything else.
    static func lifecycleFailure(_ error: Error) -> ConnectionLifecycle.Failure {
        switch error as? SIMPClientError {
        case .cannotConnect(let relayAndReason): .cannotConnect(relayAndReason: relayAndReason)
        case .timedOut(let what): .timedOut(what: what)
        default: .other
        }
    }

    /// The error a connect attempt fails with, for what the lifecycle decided of it.
    static func connectError(_ failure: ConnectionLifecycle.Failure) -> SIMPClientError {
        switch failure {
        case .cannotConnect(let relayAndReason): .cannotConnect(relayAndReason)
        case .timedOut(let what): .timedOut(what)
        case .other: .connectionLost
        }
    }

    /// The relay to connect to next.
    var server: RelayEndpoint { configuration.servers[session.lifecycle.current] }

    /// Says that the lifecycle moved on to the next configured relay (failover), if it did.
    func logNextServer(after error: Error?, from previous: Int? = nil) {
        guard configuration.servers.count > 1 else { return }
        let servers = configuration.servers
        let previous = previous ?? (session.lifecycle.current + servers.count - 1) % servers.count
        logger.info(
            "trying the next relay",
            metadata: ["failed": "\(servers[previous])", "next": "\(server)", "error": "\(error.map { "\($0)" } ?? "connection lost")"])
    }

    /// Opens a control connection to the current relay, logs in and registers; on CONNECTED,
    /// resumes sending.
    func connectControl() -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: (SIMPMessage, ClientSession.Output).self)
        handshake = (nil, promise)
        if let warning = session.lifecycle.connecting(host: server.host, usesTLS: tlsContext != nil) { logger.warning("\(warning)") }
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
                schedule(at: session.lifecycle.loginStarted(now: now)) { [self] in
                    guard session.lifecycle.loginTimedOut(now: now) else { return }
                    promise.fail(SIMPClientError.timedOut("waiting for the relay to accept the login"))
                }
            }
        }
        return promise.futureResult.flatMapErrorThrowing { [self] error in
            session.lifecycle.loginEnded()
            handshake?.channel?.close(promise: nil)
            handshake = nil
            throw error
        }.map { [self] accepted, output in adopt(accepted, output) }
    }

    func adopt(_ accepted: SIMPMessage, _ output: ClientSession.Output) {
        guard let channel = handshake?.channel else { return }
        session.lifecycle.loginEnded()
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
            guard session.mayConnect else { return }
            connectOrRetry(attempt: attempt)
        }
    }

    /// Connects to the current relay; a failed attempt goes to the session, which plans the
    /// next one and the relay it goes to, or stops (`ClientSession.connectFailed`).
    package func connectOrRetry(attempt: Int = 0) {
        connectControl().whenFailure { [self] error in
            logger.debug("connect attempt failed", metadata: ["attempt": "\(attempt)", "error": "\(error)"])
            guard session.mayConnect else { return }
            let (output, step) = session.connectFailed(random: environment.random())
            carryOut(output)
            follow(step, after: error)
        }
    }

    /// Carries out what the session decided about the connection (`ClientSession.ConnectionStep`).
    func follow(_ step: ClientSession.ConnectionStep, after error: Error? = nil) {
        switch step {
        case .nothing: break
        case .reconnect(let failover?): logNextServer(after: error, from: failover.from)
        case .reconnect(nil): break
        case .stop(let why): stop(because: why.explanation(device: configuration.device, tokens: configuration.accessToken?.renewal ?? .none))
        case .offline:
            onStateChange(.offline(reason: ClientSession.Stop.connectionLostText))
            failWaiters()
        case .closedByUser: failWaiters()
        }
    }

    /// The user asks to connect again after the session stopped for good (the core decides:
    /// `ClientSession.connectAgainRequested`); returns false when it had not stopped.
    func connectAgain() -> Bool {
        guard session.connectAgainRequested() else { return false }
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
    /// The pace first transmissions and retransmissions keep to: the configured one, or 90 %
    /// of the rate the relay announced in CONNECTED (nil: unpaced).
    public var pacing: RateLimit?
    /// RATE_LIMITED notices the relay sent for this user's rate (each slowed the pace).
    public var rateLimitRefusals = 0
}
