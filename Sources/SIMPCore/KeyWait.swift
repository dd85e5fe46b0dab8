import NIOCore

/// What a sender does with a direct message once it asked the relay for its receiver's
/// devices (docs/PROTOCOL.md §4.8, "Sending"), sans-I/O: the shell reports how the KEYS_FETCH
/// went and what the device already knew, and carries out the decision. Nothing is ever sent
/// unencrypted because keys are missing: a message waits for them instead.
public struct KeyWait: Sendable, Equatable {
    /// How the relay answered a KEYS_FETCH for the receiver.
    public enum Fetch: Sendable, Equatable {
        /// The receiver's devices with a published bundle (possibly none: never logged in yet,
        /// or the relay lost its bundles).
        case devices(count: Int)
        /// The receiver does not exist.
        case noSuchUser
        /// The relay could not answer now: the connection is down, its store failed ("key
        /// bundles unavailable, try again"), or no answer came in time. Asked again later.
        case unavailable
    }

    /// Why a KEYS_FETCH brought no answer, as the shell saw it.
    public enum Failure: Sendable, Equatable {
        /// The control connection was down, or was lost before the answer came.
        case connectionLost
        /// No answer came in time.
        case timedOut
        /// The relay answered with this error.
        case refused(SIMPMessage.ErrorCode)
        /// Anything else (an answer that could not be used, a local error).
        case other
    }

    /// What to do with the message.
    public enum Decision: Sendable, Equatable {
        /// Seal it for the devices the sender knows now, and send it.
        case seal
        /// Send it with an empty envelope: no content leaves the device, and the relay answers
        /// UNKNOWN_RECIPIENT as for any message to a user who does not exist.
        case sealForNobody
        /// Keep it (in the outbox) and ask the relay again at `retry` (nil: at the next login);
        /// the message is given up at its give-up time.
        case holdForRelay(retry: NIODeadline?)
        /// Keep it (in the outbox) until the receiver publishes keys: the user is told it waits
        /// for the receiver's first login. The relay tells the sender when the receiver
        /// publishes; the sender also asks again at `recheck` (which keeps it a watcher of the
        /// receiver's bundles, PROTOCOL §7.11). Never given up: it stays in the outbox.
        case waitForFirstKeys(recheck: NIODeadline)
    }

    /// How long after a failed fetch the sender asks again (while connected).
    public var retryAfter: TimeAmount = .seconds(2)
    /// How often a message waiting for its receiver's first keys asks again: under the relay's
    /// watch period (10 minutes), so the relay keeps telling this sender of new bundles.
    public var recheckAfter: TimeAmount = .minutes(4)

    public init() {}

    /// How a fetch that failed with `failure` counts: `.unavailable` (only for now: the message
    /// waits and the relay is asked again) when the connection is down, no answer came in time,
    /// the relay's store failed (INTERNAL, "key bundles unavailable, try again") or the relay
    /// throttles this client (RATE_LIMITED); nil for anything else, which fails the message.
    public static func fetch(after failure: Failure) -> Fetch? {
        switch failure {
        case .connectionLost, .timedOut, .refused(.internal), .refused(.rateLimited): .unavailable
        case .refused, .other: nil
        }
    }

    /// The decision for a message to a receiver after `fetch`; `knownDevices` is how many of the
    /// receiver's devices the sender knew before (an earlier fetch, or devices that wrote to it),
    /// `connected` whether the control connection is up.
    public func decide(after fetch: Fetch, knownDevices: Int, connected: Bool, now: NIODeadline) -> Decision {
        switch fetch {
        case .noSuchUser:
            return .sealForNobody
        case .devices(let count) where count > 0 || knownDevices > 0:
            // An empty answer for a receiver the sender has sessions with means the relay lost its
            // bundles (its receiver is asked to publish again): the known devices still read it.
            return .seal
        case .devices:
            return .waitForFirstKeys(recheck: now + recheckAfter)
        case .unavailable where knownDevices > 0:
            // What the device knows decides, as it would have a moment before; the list is
            // fetched again with the next message.
            return .seal
        case .unavailable:
            return .holdForRelay(retry: retry(connected: connected, now: now))
        }
    }

    /// When to ask the relay again after a fetch that failed only for now (`Fetch.unavailable`)
    /// at `now`: after `retryAfter` while connected, nil (at the next login) otherwise. The same
    /// for a message's receiver's devices and for the devices whose session here must be
    /// restarted first (a session restored from a copy).
    public func retry(connected: Bool, now: NIODeadline) -> NIODeadline? {
        connected ? now + retryAfter : nil
    }

    /// Whether a message held for the relay since `heldAt` is given up at `now` (its give-up
    /// time, `RetransmitPolicy.giveUpAfter`, has passed).
    public func givesUp(heldAt: NIODeadline, now: NIODeadline, giveUpAfter: TimeAmount) -> Bool {
        now - heldAt >= giveUpAfter
    }
}
