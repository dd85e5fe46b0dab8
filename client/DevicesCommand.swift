import ArgumentParser
import Foundation
import SIMPClient

struct Devices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Approve a new device of yours, so that the people you talk to encrypt to it.",
        discussion: """
            Your first device makes your user key and signs the list of your approved devices with \
            it. People who know your user key encrypt only to the devices on that list: a device \
            the relay's operator adds under your name gets nothing. A new device of yours gets \
            nothing either until you approve it, on the device that holds your user key: \
            `simp devices approve NAME` (NAME as `-- a new device "NAME" logged in as you` said), \
            after checking that the device code it shows is the one NAME shows. Approve only a \
            device you just logged in yourself.
            """,
        subcommands: [Approve.self, Remove.self, Reset.self])

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Sign a new device list, with your user key, without device NAME (lost, or approved by mistake), and publish it.",
            discussion: "Run it on the device that holds your user key. People's next message after they fetch the list no longer goes to NAME.")

        @OptionGroup var connection: ConnectionOptions

        @Argument(help: ArgumentHelp("The device to remove.", valueName: "name"))
        var name: String

        func run() async throws {
            try await Devices.change(as: connection, failing: "remove \(name)") { client, user, _ in
                let approved = try await client.removeDevice(name)
                return "\(name) is removed; \(user)'s devices now: \(approved.joined(separator: ", "))"
            }
        }
    }

    struct Reset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a new user key on this device, approving this device alone (the device holding the old one is lost).",
            discussion: """
                Everyone who knew your old user key is told your safety number changed (a verified \
                contact stops sending to you until they accept it), and your other devices must be \
                approved again from this one with `simp devices approve NAME`.
                """)

        @OptionGroup var connection: ConnectionOptions

        func run() async throws {
            try await Devices.change(as: connection, failing: "make a new user key") { client, user, device in
                try await client.resetUserKey()
                return "\(user) has a new user key, held by \(device), which approves \(device) alone"
            }
        }
    }

    struct Approve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Sign a new device list, with your user key, that includes device NAME, and publish it.",
            discussion: """
                Run it on the device that holds your user key (your first device). Exits 1 when this \
                device does not hold it, NAME has no keys at the relay, or the relay cannot be reached.
                """)

        @OptionGroup var connection: ConnectionOptions

        @Argument(help: ArgumentHelp("The device to approve.", valueName: "name"))
        var name: String

        @Option(
            help: ArgumentHelp(
                "The device code NAME shows (`this device (NAME) is not approved …; its device code is …`): approve only keys with it. "
                    + "Without it, the code of the keys the relay serves is shown and, on a terminal, asked about.",
                valueName: "digits"))
        var code: String?

        func run() async throws {
            try await Devices.change(as: connection, failing: "approve \(name)") { client, user, _ in
                var code = self.code ?? ""
                if self.code == nil { code = try await confirmedCode(client) }
                let approved = try await client.approveDevice(name, code: code)
                return "\(name) (device code \(code)) is approved; \(user)'s devices now: \(approved.joined(separator: ", "))"
            }
        }

        /// The code of the keys the relay serves as NAME, once the user said NAME shows it
        /// (asked on a terminal; elsewhere the command stops and says how to give `--code`).
        private func confirmedCode(_ client: SIMPClient) async throws -> String {
            let served = try await client.deviceCode(of: name)
            let check = "check that \(name) shows the device code \(served) (its simp listen or simp chat says it)"
            guard isatty(STDIN_FILENO) == 1 else {
                throw ValidationError("\(check), then run: simp devices approve \(name) --code '\(served)'")
            }
            print("The keys the relay serves as \(name) have the device code \(served).")
            print("Does \(name) show the same code? [y/N] ", terminator: "")
            guard let answer = readLine(), answer.lowercased().hasPrefix("y") else {
                throw ValidationError("not approved: \(name) does not show \(served), so these may not be its keys")
            }
            return served
        }
    }

    /// Connects as this device (its own keys only, never new ones), runs `change` with the user
    /// and device names, closes, and prints the line `change` returns; exits 1 with "simp: cannot
    /// WHAT: …" when it throws, and before connecting when a running `simp` holds the device.
    static func change(
        as options: ConnectionOptions, failing what: String, _ change: (SIMPClient, String, String) async throws -> String
    ) async throws {
        let home = SIMPHome.directory()
        var connection = options
        let device = try connection.device ?? DeviceName.standard(home: home)
        connection.device = device
        if let pid = DeviceLock.holder(home: home, user: connection.user, device: device) {
            fail("simp: device \"\(device)\" of \(connection.user) is in use by a running simp (process \(pid)): run this after it exits")
        }
        let client = try await connection.connect(sendOnly: true, configure: { $0.endToEnd?.existingKeysOnly = true })
        do {
            let line = try await change(client, connection.user, device)
            await client.close()
            print(line)
        } catch {
            await client.close()
            fail("simp: cannot \(what): \(error)")
        }
    }
}
