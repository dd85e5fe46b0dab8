import ArgumentParser
import NIOCore
import SIMPCore

/// The relay's limits against abuse (docs/OPERATIONS.md §10, "Limits against abuse"): the
/// login deadline, the caps on connections that have not logged in, and the control requests'
/// budgets.
struct LimitOptions: ParsableArguments {
    @Option(
        name: .customLong("login-timeout"),
        help: "Seconds a control connection may take to log in from when it opens; then it is closed (idle ones and half-sent frames too).")
    var loginTimeout = Double(RelayLimits().loginTimeout.nanoseconds) / 1e9

    @Option(
        name: .customLong("max-unauthenticated-per-host"),
        help: "Control connections not logged in yet from one IP address; one more is refused (RATE_LIMITED).")
    var maxUnauthenticatedPerHost = RelayLimits().maxUnauthenticatedPerHost

    @Option(
        name: .customLong("max-unauthenticated"),
        help: "Control connections not logged in yet in all; one more closes the oldest of them.")
    var maxUnauthenticated = RelayLimits().maxUnauthenticated

    @Option(
        name: .customLong("max-requests-in-flight"),
        help:
            "Requests of one connection waiting for Redis (key fetches and publishes, room and presence requests); at this many the relay stops reading the connection until answers come back."
    )
    var maxRequestsInFlight = RelayLimits().maxRequestsInFlight

    @Option(
        name: .customLong("request-rate"),
        help: ArgumentHelp(
            "Control requests per second per connection, by kind: KIND=RATE[,KIND=RATE…]; a user may make twice that over its connections.",
            discussion:
                "Kinds: \(ControlRequestKind.allCases.map { "\($0.rawValue) (\(RequestRates.format($0.defaultBudget.perSecond)))" }.joined(separator: ", ")). The burst is 10 seconds' worth. Over it, the request is refused with ERROR RATE_LIMITED (retryAfterMillis says when to try again).",
            valueName: "kind=rate,..."))
    var requestRates = RequestRates(rates: [:])

    @Option(
        name: .customLong("prekey-claim-rate"),
        help:
            "One-time prekeys one user may claim per minute from one other user's devices (burst: 100 seconds' worth); more fetches of that user are refused."
    )
    var prekeyClaimRate = RelayLimits().prekeyClaims.perSecond * 60

    @Option(
        name: .customLong("max-devices-per-user"),
        help:
            "Devices one user may have (receiving devices, and devices with a key bundle); the login or KEYS_PUBLISH of one more is refused (LIMIT_REACHED). A device unused for the inbox TTL is forgotten."
    )
    var maxDevicesPerUser = RelayLimits().maxDevicesPerUser

    func validate() throws {
        guard loginTimeout > 0 else { throw ValidationError("--login-timeout must be positive") }
        guard maxUnauthenticatedPerHost >= 1, maxUnauthenticated >= 1 else {
            throw ValidationError("--max-unauthenticated-per-host and --max-unauthenticated must be at least 1")
        }
        guard maxRequestsInFlight >= 1 else { throw ValidationError("--max-requests-in-flight must be at least 1") }
        guard prekeyClaimRate > 0 else { throw ValidationError("--prekey-claim-rate must be positive") }
        guard maxDevicesPerUser >= 1 else { throw ValidationError("--max-devices-per-user must be at least 1") }
    }

    /// The limits these options describe.
    var limits: RelayLimits {
        var limits = RelayLimits()
        limits.loginTimeout = .nanoseconds(Int64(loginTimeout * 1e9))
        limits.maxUnauthenticatedPerHost = maxUnauthenticatedPerHost
        limits.maxUnauthenticated = maxUnauthenticated
        limits.maxRequestsInFlight = maxRequestsInFlight
        for (kind, rate) in requestRates.rates { limits.budgets[kind] = kind.defaultBudget.scaled(toPerSecond: rate) }
        limits.prekeyClaims = limits.prekeyClaims.scaled(toPerSecond: prekeyClaimRate / 60)
        limits.maxDevicesPerUser = maxDevicesPerUser
        return limits
    }
}

/// `--request-rate key-fetch=5,who=2`: rates per second by request kind (`SIMP_REQUEST_RATE`
/// and a config file's string give the same list).
struct RequestRates: ExpressibleByArgument, Sendable {
    let rates: [ControlRequestKind: Double]

    init(rates: [ControlRequestKind: Double]) { self.rates = rates }

    init?(argument: String) {
        var rates: [ControlRequestKind: Double] = [:]
        for item in argument.split(separator: ",") {
            let parts = item.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, let kind = ControlRequestKind(rawValue: parts[0]), let rate = Double(parts[1]), rate > 0 else {
                return nil
            }
            rates[kind] = rate
        }
        self.rates = rates
    }

    var defaultValueDescription: String {
        ControlRequestKind.allCases.map { "\($0.rawValue)=\(Self.format(rates[$0] ?? $0.defaultBudget.perSecond))" }.joined(separator: ",")
    }

    static func format(_ rate: Double) -> String { rate == rate.rounded() ? String(Int(rate)) : String(rate) }
}
