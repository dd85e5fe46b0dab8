import ArgumentParser
import Logging
import NIOPosix
import SIMPCommandLine
import SIMPCore
import SIMPRedis
import SIMPRelay

/// `simp-server user add|remove|list|lock|unlock`: the users who may log in, kept in Redis.
struct UserCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user",
        abstract: "Manage the users who may log in (stored in Redis as salted verifiers, never as passwords).",
        subcommands: [Add.self, Remove.self, List.self, Lock.self, Unlock.self])

    struct RedisOption: ParsableArguments {
        @Option(help: "Redis server the relays use: redis://[[USER]:PASSWORD@]HOST:PORT[/DB] or rediss://…, or their Redis Cluster: redis+cluster://HOST:PORT[,HOST:PORT…].")
        var redis = "redis://127.0.0.1:6379"

        func validate() throws {
            do { _ = try RedisEndpoint(parsing: redis) } catch { throw ValidationError("\(error)") }
        }

        /// Runs `body` with a credential store, turning failures into one-line errors.
        func withStore(_ body: (CredentialStore) async throws -> Void) async throws {
            try await withRedis(command: "user") { try await body(CredentialStore(redis: $0)) }
        }

        /// Runs `body` with a Redis client, turning failures into one-line errors naming `command`.
        func withRedis(command: String, _ body: (any RedisCommands) async throws -> Void) async throws {
            let client = try RedisEndpoint(parsing: redis).makeClient(eventLoop: MultiThreadedEventLoopGroup.singleton.next(),
                                                                     logger: Logger(label: "simp.redis"))
            defer { Task { await client.shutdown() } }
            do {
                try await body(client)
            } catch let error as ExitCode {
                throw error
            } catch {
                printError("simp-server \(command): \(error)")
                throw ExitCode.failure
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a user (or, with --replace, set a new password).",
            discussion: """
                The password is read from --password-file, else from the SIMP_PASSWORD environment \
                variable, else asked for twice on the terminal.
                """)

        @Argument(help: "The user id.")
        var user: String

        @Option(name: .customLong("password-file"), help: "File whose first line is the password.")
        var passwordFile: String?

        @Option(help: "PBKDF2 iterations (at least 4096); more makes guessing slower, and logging in too.")
        var iterations: UInt32 = PasswordVerifier.defaultIterations

        @Flag(help: "Replace the password of an existing user.")
        var replace = false

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
                print(replace ? "password of \(user) replaced" : "user \(user) added")
            }
        }

        private func readPassword() throws -> String {
            do {
                if let password = try PasswordInput.read(file: passwordFile) { return password }
                guard let first = try PasswordInput.prompt("password for \(user): ") else {
                    printError("simp-server user add: no password: give --password-file, set SIMP_PASSWORD, or run it in a terminal")
                    throw ExitCode.failure
                }
                guard try PasswordInput.prompt("again: ") == first else {
                    printError("simp-server user add: the passwords differ")
                    throw ExitCode.failure
                }
                return first
            } catch let error as PasswordInput.Failure {
                printError("simp-server user add: \(error)")
                throw ExitCode.failure
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a user: it can no longer log in (live sessions go on until they end).")

        @Argument(help: "The user id.")
        var user: String

        @OptionGroup var options: RedisOption

        func run() async throws {
            try await options.withStore { store in
                try await store.remove(user)
                print("user \(user) removed")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print every user who can log in, one per line.")

        @OptionGroup var options: RedisOption

        func run() async throws {
            try await options.withStore { store in
                for user in try await store.users() { print(user) }
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
                print("user \(user) locked")
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
                print("user \(user) unlocked")
            }
        }
    }
}
