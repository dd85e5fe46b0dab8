import ArgumentParser
import Logging
import NIOPosix
import SIMPCommandLine
import SIMPCore
import SIMPRedis
import SIMPRelay

/// `simp-server user add|remove|list|lock|unlock|deny-tokens`: the users who may log in, kept in Redis.
struct UserCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user",
        abstract: "Manage the users who may log in (stored in Redis as salted verifiers, never as passwords).",
        subcommands: [Add.self, Remove.self, List.self, Lock.self, Unlock.self, DenyTokens.self])

    struct RedisOption: ParsableArguments {
        @Option(
            help:
                "Redis server the relays use: redis://[[USER]:PASSWORD@]HOST:PORT[/DB] or rediss://…, or their Redis Cluster: redis+cluster://HOST:PORT[,HOST:PORT…]."
        )
        var redis = Self.defaultRedis

        func validate() throws {
            do { _ = try RedisEndpoint(parsing: redis) } catch { throw ValidationError("\(error)") }
        }

        /// Runs `body` with a credential store, turning failures into one-line errors.
        func withStore(_ body: (CredentialStore) async throws -> Void) async throws {
            try await withRedis(command: "user") { try await body(CredentialStore(redis: $0)) }
        }

        /// The Redis used, as the output names it (passwords shown as `***`).
        var shown: String { (try? RedisEndpoint(parsing: redis).description) ?? redis }

        /// The default, which `scripts/run-server` does not use (its Redis is on 6390).
        static let defaultRedis = "redis://127.0.0.1:6379"

        /// Runs `body` with a Redis client, turning failures into one-line errors naming `command`
        /// and the Redis (with a hint when it is the default).
        func withRedis(command: String, _ body: (any RedisCommands) async throws -> Void) async throws {
            let client = try RedisEndpoint(parsing: redis).makeClient(
                eventLoop: MultiThreadedEventLoopGroup.singleton.next(),
                logger: Logger(label: "simp.redis"))
            defer { Task { await client.shutdown() } }
            do {
                try await body(client)
            } catch let error as ExitCode {
                throw error
            } catch {
                let hint =
                    redis == Self.defaultRedis ? ", the default; scripts/run-server's is redis://127.0.0.1:6390: give --redis or SIMP_REDIS" : ""
                let what = (error as? RedisError)?.unavailable == true ? "cannot reach Redis: \(SocketErrorText.reason(error))" : "\(error)"
                printError("simp-server \(command): \(what) (Redis \(shown)\(hint))")
                throw ExitCode.failure
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a user (or, with --replace, set a new password).",
            discussion: """
                The password is read from --password-file, else from the SIMP_PASSWORD environment \
                variable, else asked for twice on the terminal (a weak one, or a second entry that differs, is \
                asked for again, up to 3 tries). A weak password is refused: fewer than \
                \(PasswordStrength.minimumLength) characters, the user name in it, only digits, one character \
                repeated, or a common password such as "password123" (whoever reads the Redis can guess \
                offline; docs/PROTOCOL.md §4.2). A passphrase of a few words is strong.
                """)

        @Argument(help: "The user id.")
        var user: String

        @Option(name: .customLong("password-file"), help: "File whose first line is the password.")
        var passwordFile: String?

        @Option(help: "PBKDF2 iterations (at least 4096); more makes guessing slower, and logging in too.")
        var iterations: UInt32 = PasswordVerifier.defaultIterations

        @Flag(help: "Replace the password of an existing user.")
        var replace = false

        @Flag(name: .customLong("allow-weak"), help: "Accept a weak password (tests and throwaway setups only).")
        var allowWeak = false

        @OptionGroup var options: RedisOption

        func validate() throws {
            guard !user.isEmpty else { throw ValidationError("the user id must not be empty") }
            guard iterations >= PasswordVerifier.minimumIterations else {
                throw ValidationError("--iterations must be at least \(PasswordVerifier.minimumIterations)")
            }
        }

        func run() async throws {
            let password = try readPassword()
            let verifier = PasswordVerifier.make(password: password, iterations: iterations)
            try await options.withStore { store in
                try await store.add(user, verifier: verifier, replace: replace)
                print(replace ? "password of \(user) replaced in \(options.shown)" : "user \(user) added in \(options.shown)")
            }
        }

        /// Tries at the terminal before giving up, as passwd(1) does.
        static let promptTries = 3

        /// The password from the file or the environment (refused if weak), else asked for on the
        /// terminal: a weak one, or a second entry that differs, is said why and asked for again.
        private func readPassword() throws -> String {
            do {
                if let password = try PasswordInput.read(file: passwordFile) {
                    if let weakness = weakness(of: password) {
                        printError("simp-server user add: refused a weak password for \(user): \(weakness) \(Self.strongAdvice)")
                        throw ExitCode.failure
                    }
                    return password
                }
                for _ in 0..<Self.promptTries {
                    guard let first = try PasswordInput.prompt("password for \(user): ") else {
                        printError("simp-server user add: no password: give --password-file, set SIMP_PASSWORD, or run it in a terminal")
                        throw ExitCode.failure
                    }
                    if let weakness = weakness(of: first) {
                        printError("too weak: \(weakness) \(Self.strongAdvice); try another")
                        continue
                    }
                    guard try PasswordInput.prompt("again: ") == first else {
                        printError("the two entries differ; once more")
                        continue
                    }
                    return first
                }
                printError("simp-server user add: no password set for \(user) after \(Self.promptTries) tries")
                throw ExitCode.failure
            } catch let error as PasswordInput.Failure {
                printError("simp-server user add: \(error)")
                throw ExitCode.failure
            }
        }

        private func weakness(of password: String) -> String? {
            allowWeak ? nil : PasswordStrength.weakness(of: password, user: user)
        }

        private static let strongAdvice = "(a passphrase of a few words is strong; --allow-weak accepts it anyway)"
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a user: it can no longer log in (live sessions go on until they end).")

        @Argument(help: "The user id.")
        var user: String

        @OptionGroup var options: RedisOption

        func run() async throws {
            try await options.withStore { store in
                try await store.remove(user)
                print("user \(user) removed from \(options.shown)")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print every user, one per line; a locked one as \"NAME (locked)\".",
            discussion: "Standard error names the Redis read and how many users it holds.")

        @OptionGroup var options: RedisOption

        func run() async throws {
            try await options.withStore { store in
                let users = try await store.users()
                printError("\(users.count) user\(users.count == 1 ? "" : "s") in \(options.shown)")
                for user in users { print(try await store.isLocked(user) ? "\(user) (locked)" : user) }
            }
        }
    }

    struct Lock: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop a user from logging in (the client is told \"login failed\", as for a wrong password).",
            discussion: "Sessions already open go on: end them with `simp-server sessions end USER`. The relay logs the reason.")

        @Argument(help: "The user id.")
        var user: String

        @OptionGroup var options: RedisOption

        func run() async throws {
            try await options.withStore { store in
                try await store.setLocked(user, true)
                print("user \(user) locked in \(options.shown)")
            }
        }
    }

    struct Unlock: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Let a locked user log in again.")

        @Argument(help: "The user id.")
        var user: String

        @OptionGroup var options: RedisOption

        func run() async throws {
            try await options.withStore { store in
                try await store.setLocked(user, false)
                print("user \(user) unlocked in \(options.shown)")
            }
        }
    }
}
