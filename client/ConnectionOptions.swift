import ArgumentParser
import Foundation
import Logging
import SIMPClient
import SIMPCommandLine
import SIMPCore

/// Flags every subcommand shares.
struct ConnectionOptions: ParsableArguments {
    @Option(
        name: .customLong("server"),
        help: ArgumentHelp(
            "The relay's control address HOST:PORT; several, tried in order, separated by commas (HOST:PORT,HOST:PORT) or with --server again.",
            discussion:
                "The client tries them in turn until one accepts the login, moving on when a connection is refused or times out: at start-up, and whenever the current one is lost. They may be several relays sharing one Redis, or one relay's several control ports (simp-server --port 7600 --port 443) for a network that only lets some ports out.",
            valueName: "server"))
    var servers: [String] = ["127.0.0.1:7600"]

    /// Every relay address given, comma-separated, in order.
    var server: String { servers.joined(separator: ",") }

    @Option(help: "Your user id.")
    var user: String

    @Option(
        name: .customLong("password-file"),
        help: ArgumentHelp(
            "File whose first line is your password.",
            discussion:
                "Without it, the password comes from the SIMP_PASSWORD environment variable, or is asked for when standard input is a terminal. Relays started with --no-login need none."
        ))
    var passwordFile: String?

    @Option(
        name: .customLong("token-file"),
        help: ArgumentHelp(
            "Log in with the access token (JWT) in this file instead of a password; read again to renew it.",
            discussion:
                "The relay must be started with --jwks. Before the token expires simp reads the file again and hands the relay the new token on the same connection. Without --token-file or --token-command, a token in the SIMP_TOKEN environment variable is used (it cannot be renewed)."
        ))
    var tokenFile: String?

    @Option(
        name: .customLong("token-command"),
        help: ArgumentHelp(
            "Log in with the access token this shell command prints; run again shortly before the token expires.",
            discussion: "As git's and kubectl's credential helpers: the command prints a token on standard output and exits 0."))
    var tokenCommand: String?

    @Flag(
        help: ArgumentHelp(
            "TLS on the control channel: the relay's certificate must be valid for the HOST of --server.",
            discussion: "It is checked against the system's trusted CAs, or --ca."))
    var tls = false

    @Option(help: "PEM file of the CA that signed the relay's certificate (implies --tls).")
    var ca: String?

    @Option(
        help: ArgumentHelp(
            "The name of this device (1-64 letters, digits, '.', '_', '-').",
            discussion:
                "Each device of a user has its own session: chat in one terminal and listen in another both receive. Default: a name made once and kept in $SIMP_HOME/device (random words, such as amber-otter-3fa2, not the host name); a second client running at the same time takes amber-otter-3fa2-2, and so on. A device can be used by one running client at a time. Messages not yet delivered when simp exits wait in $SIMP_HOME/outbox and are resent by the next simp of the same user and device."
        ))
    var device: String?

    @Flag(
        name: .customLong("no-e2e"),
        help: ArgumentHelp(
            "Send unencrypted to a peer that cannot decrypt (it published no end-to-end keys, or the relay keeps none).",
            discussion:
                "Direct messages are end-to-end encrypted: only the receiver's devices can read them; the relay and Redis see ciphertext. Without this flag a message to a peer that has no keys yet (it never logged in) waits in the outbox and goes, end to end, at its first login; a room post is encrypted for the members with keys, and you are told who cannot read it. simp listen --no-e2e also shows messages that did not come end-to-end encrypted (as --allow-plaintext). This device's keys live in $SIMP_HOME/e2e (mode 0600)."
        ))
    var noE2E = false

    @Option(
        help: ArgumentHelp(
            "on or off: whether users you share a conversation or room with see when you are online and when you were last seen.",
            discussion:
                "With on (the default) the relay shows your presence (online, or last seen to the minute) only to users you sent a direct message to and members of your rooms. With off it shows it to nobody: their /who says there is no presence information for you, exactly as for a user who does not exist. Each login of a device that receives (chat, listen) sets it again.",
            valueName: "on|off"))
    var presence = "on"

    @Option(name: .customLong("udp-port"), help: "Local UDP port to receive on (0 picks a free one).")
    var udpPort = 0

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = "warning"

    func validate() throws {
        do { _ = try MessageFormatting.parseServers(server) } catch { throw ValidationError("\(error)") }
        guard !user.isEmpty else { throw ValidationError("--user must not be empty") }
        if tokenFile != nil, tokenCommand != nil { throw ValidationError("--token-file and --token-command: give one of them") }
        if let device, let problem = DeviceName.problem(with: device) { throw ValidationError("--device: \(problem)") }
        guard (0...65535).contains(udpPort) else { throw ValidationError("--udp-port must be 0-65535") }
        guard ["on", "off"].contains(presence) else { throw ValidationError("--presence must be on or off, not \"\(presence)\"") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level \(logLevel)") }
    }

    /// Sets up logging (to stderr, or to `logHandler`), takes this user's device (`--device`,
    /// or the first free default one) with its outbox, and connects, or exits with a one-line
    /// error. A `sendOnly` session never receives (docs/PROTOCOL.md §4.7).
    func connect(
        sendOnly: Bool = false, logHandler: (@Sendable (String, Logger.Level) -> LogHandler)? = nil,
        configure: (inout ClientConfiguration) -> Void = { _ in }
    ) async throws -> SIMPClient {
        let level = Logger.Level(rawValue: logLevel)!
        LoggingSystem.bootstrap { label in
            if let logHandler { return logHandler(label, level) }
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        var configuration = ClientConfiguration(servers: try MessageFormatting.parseServers(server), user: user)
        configuration.localUDPPort = udpPort
        configuration.sendOnly = sendOnly
        configuration.hidePresence = presence == "off"
        let home = SIMPHome.directory()
        do {
            let lock = try DeviceLock.acquire(home: home, user: user, device: device)
            configuration.device = lock.device
            configuration.outbox = try Outbox(home: home, user: user, device: lock.device, holding: lock)
        } catch let error as DeviceError where error.inUse {
            fail("simp: \(error)")
        } catch {
            // A home that cannot be written (read-only, full) costs the outbox, not the session.
            configuration.device = device ?? ""
            FileHandle.standardError.write(
                Data(
                    ("simp: \(error); going on without an outbox: messages are kept in memory only, "
                        + "and simp says at exit which were not delivered and are lost\n").utf8))
        }
        if tls || ca != nil { configuration.tls = ClientTLS(caFile: ca) }
        configuration.endToEnd = EndToEndSettings(home: home, allowUnencrypted: noE2E)
        configuration.endToEnd?.makesUserKey = true // the first device makes the user key (docs/E2E.md §3.4)
        configure(&configuration)
        configuration.accessToken = accessToken
        if configuration.accessToken == nil {
            do { configuration.password = try PasswordInput.read(file: passwordFile) } catch { fail("simp: \(error)") }
        }
        do {
            return try await Self.connect(configuration)
        } catch SIMPClientError.rejected(.authFailed, LoginClient.Failure.passwordRequired.description) {
            // The relay wants a password and none was given: ask, if someone is at the keyboard.
            let asked: String?
            do { asked = try PasswordInput.prompt("password for \(user): ") } catch { fail("simp: \(error)") }
            guard let asked else { fail("simp: \(LoginClient.Failure.passwordRequired)") }
            configuration.password = asked
            do { return try await Self.connect(configuration) } catch { fail("simp: \(error)") }
        } catch {
            fail("simp: \(error)")
        }
    }

    /// Where the access token comes from: --token-command, --token-file, else SIMP_TOKEN; nil:
    /// log in with a password.
    var accessToken: AccessTokenSource? {
        if let tokenCommand { return .command(tokenCommand) }
        if let tokenFile { return .file(tokenFile) }
        if let token = ProcessInfo.processInfo.environment["SIMP_TOKEN"], !token.isEmpty { return .fixed(token) }
        return nil
    }

    private static func connect(_ configuration: ClientConfiguration) async throws -> SIMPClient {
        let client = SIMPClient(configuration: configuration)
        do {
            try await client.connect()
            return client
        } catch {
            await client.close()
            throw error
        }
    }
}

/// Prints `line` to standard error and exits with status 1.
func fail(_ line: String) -> Never {
    FileHandle.standardError.write(Data((line + "\n").utf8))
    exit(1)
}
