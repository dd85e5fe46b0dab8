import CoreMetrics
import Logging
import SIMPCore

/// What the core reports happened (`RelayAction.event`), as an operator sees it: the logs of
/// users connecting and leaving, the `simp_sessions` gauge and the count of stored messages.
extension RelayEngine {
    /// Logs and counts what the core reports happened (`RelayAction.event`).
    func report(_ event: RelayEvent) {
        switch event {
        case .userConnected(let registration):
            metrics.sessions.record(core.connectedUsers)
            logger.info(
                "user connected",
                metadata: [
                    "user": "\(registration.user)", "device": "\(registration.device)",
                    "sendOnly": "\(!registration.receives)", "udp": "\(AddressText.format(registration.route.address) ?? "?")",
                ])
        case .userDisconnected(let registration, let reason):
            metrics.sessions.record(core.connectedUsers)
            // A stopping relay ends every session at once: one line says so (RelayService).
            let level: Logger.Level = reason == .relayStopped ? .debug : .info
            logger.log(
                level: level, "user disconnected",
                metadata: ["user": "\(registration.user)", "device": "\(registration.device)", "reason": "\(reason.rawValue)"])
        case .inboxStored:
            counts.inboxStored += 1
        }
    }
}
