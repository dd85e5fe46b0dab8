import Dispatch
import NIOCore
import SIMPCore

/// The access token's renewal on the registered connection (docs/PROTOCOL.md §4.9): when to
/// renew, the refresh waiting for its answer, and when the token expires.
struct TokenRenewalState {
    var timer: Scheduled<Void>?
    var refreshId: UInt64?
    var expires: Int64 = 0

    mutating func cancel() {
        timer?.cancel()
        timer = nil
        refreshId = nil
    }
}

/// Logging in with an access token and renewing it without reconnecting: the token source is
/// read off the event loop; `AccessTokenRenewal` (the core) says when.
extension ClientEngine {
    /// The access token for a login, read off the loop (nil: a password login).
    func fetchToken() -> EventLoopFuture<String?> {
        guard let source = configuration.accessToken else { return eventLoop.makeSucceededFuture(nil) }
        let promise = eventLoop.makePromise(of: String?.self)
        DispatchQueue.global().async {
            do { promise.succeed(try source.read()) } catch { promise.fail(error) }
        }
        return promise.futureResult
    }

    /// The relay accepted a token login (or a renewal): the token expires at `expires` (ms
    /// since the epoch); its renewal is planned.
    func tokenSessionStarted(expires: Int64) {
        tokenRenewal.cancel()
        tokenRenewal.expires = expires
        guard let source = configuration.accessToken, source.renews else {
            // A one-shot sender (`simp send`) is done long before; a receiving session is told.
            logger.log(
                level: configuration.sendOnly ? .debug : .warning,
                "the access token expires in \(Self.seconds(expires - environment.wallClockMillis())) and SIMP_TOKEN cannot be renewed: the relay ends the session then (give --token-command or --token-file to renew it)"
            )
            return
        }
        let delay = AccessTokenRenewal.delay(expires: expires, nowMillis: environment.wallClockMillis())
        planRenewal(in: delay)
    }

    private func planRenewal(in millis: Int64) {
        tokenRenewal.timer = schedule(in: .milliseconds(millis)) { [self] in renewToken() }
    }

    /// Reads a new token and sends it in a TOKEN_REFRESH on the registered connection.
    private func renewToken() {
        tokenRenewal.timer = nil
        guard let control, !closedByUser else { return }
        fetchToken().assumeIsolated().whenComplete { [self] result in
            guard control === self.control else { return } // the connection changed meanwhile
            switch result {
            case .success(let token?):
                let frame = session.tokenRefresh(token)
                tokenRenewal.refreshId = frame.messageId
                control.writeAndFlush(frame, promise: nil)
            case .success(nil):
                break
            case .failure(let error):
                renewalFailed("cannot get a new access token: \(error)")
            }
        }
    }

    private func renewalFailed(_ why: String) {
        let now = environment.wallClockMillis()
        guard let retry = AccessTokenRenewal.retryDelay(expires: tokenRenewal.expires, nowMillis: now) else {
            return logger.warning("\(why); the access token has expired")
        }
        logger.warning("\(why); trying again in \(Self.seconds(retry)) (the token expires in \(Self.seconds(tokenRenewal.expires - now)))")
        planRenewal(in: retry)
    }

    /// The relay's answer to the waiting TOKEN_REFRESH, or its ERROR; false for any other frame.
    func tokenRefreshAnswered(_ message: SIMPMessage) -> Bool {
        guard let id = tokenRenewal.refreshId, message.messageId == id, message.kind == .tokenRefresh || message.kind == .error else {
            return false
        }
        tokenRenewal.refreshId = nil
        if message.kind == .error {
            renewalFailed("the relay refused the new access token: \(message.errorText)")
        } else {
            logger.info(
                "access token renewed on the same connection",
                metadata: ["expiresInSeconds": "\((message.tokenExpires - environment.wallClockMillis()) / 1000)"])
            tokenSessionStarted(expires: message.tokenExpires)
        }
        return true
    }

    private static func seconds(_ millis: Int64) -> String { "\(max(0, millis) / 1000) s" }
}
