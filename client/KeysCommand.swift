import ArgumentParser
import Foundation
import SIMPClient

struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the safety numbers with a user's devices, to check who you talk to; mark them verified or accept a change.",
        discussion: """
            `simp keys --with bob` prints the safety number of this device with each of bob's \
            devices; bob's `simp keys --with YOU` (or `/verify YOU` in simp chat) shows the same 60 \
            digits. Compare them in person or on a call: if they match, no one (the relay neither) \
            put a key of their own between you, and `simp keys --with bob --confirm` marks bob \
            verified. When the key of a verified user's device changes later (or a device is new), \
            simp sends nothing to that user (simp send exits 1 and names the device, simp chat does \
            not send, room posts with that user are refused) until you compare again and --confirm, \
            or accept the change without comparing with `simp keys --with bob --accept` (bob is then \
            no longer verified). The numbers belong to this device (the default one, or --device), \
            and simp keys uses its keys as they are: it never makes a device or keys and publishes \
            nothing. While a running simp (a chat) holds the device, simp keys refuses and names that \
            process: use /verify in the chat, or run this after quitting it. Exits 1 when the user has \
            published no end-to-end keys, or this device has none yet.
            """)

    @OptionGroup var connection: ConnectionOptions

    @Option(help: ArgumentHelp("The user whose devices to show the safety numbers with.", valueName: "name"))
    var with: String

    @Flag(help: "The numbers matched: mark the user verified with the devices shown.")
    var confirm = false

    @Flag(help: "Accept the user's changed key without comparing: the user is no longer verified, and messages to them go again.")
    var accept = false

    func validate() throws {
        guard !with.isEmpty, !with.hasPrefix("#") else { throw ValidationError("--with takes a user name (rooms have no keys)") }
        guard !(confirm && accept) else { throw ValidationError("give --confirm or --accept, not both") }
    }

    func run() async throws {
        let home = SIMPHome.directory()
        var connection = self.connection
        let device = try thisDevice(home: home)
        connection.device = device
        if let pid = DeviceLock.holder(home: home, user: connection.user, device: device) {
            fail(
                "simp: device \"\(device)\" of \(connection.user) is in use by a running simp (process \(pid)), which holds its keys: "
                    + "use /verify \(with) in that chat, or run simp keys after it exits")
        }
        let stored = try? EndToEndFileStore(home: home, user: connection.user, device: device).load("identity")
        if stored == nil {
            fail("simp: device \"\(device)\" of \(connection.user) has no end-to-end keys yet (its first simp chat, listen or send makes them)")
        }
        let client = try await connection.connect(
            sendOnly: true,
            configure: { configuration in
                configuration.endToEnd?.existingKeysOnly = true
            })
        let numbers: [(device: String, number: String)]
        var outcome: String?
        do {
            numbers = try await client.safetyNumbers(with: with)
            if confirm, !numbers.isEmpty {
                let marked = try await client.markVerified(with)
                outcome =
                    "\(with) is verified (\(marked) device\(marked == 1 ? "" : "s")): nothing is sent to \(with) if a key changes until you accept it"
            } else if accept {
                let wasVerified = try await client.acceptKeyChange(of: with)
                outcome =
                    wasVerified
                    ? "\(with)'s keys as shown are accepted; \(with) is no longer verified (--confirm after comparing)"
                    : "\(with) was not verified: nothing to accept"
            }
        } catch {
            await client.close()
            fail("simp: cannot get the safety numbers with \(with): \(error)")
        }
        await client.close()
        for line in MessageFormatting.safetyNumberLines(user: connection.user, peer: with, numbers: numbers) { print(line) }
        if let outcome { print(outcome) }
        if numbers.isEmpty { throw ExitCode(1) }
    }

    /// The device whose keys are compared: --device, or this machine's default one if it was
    /// made (simp keys makes no device name of its own).
    private func thisDevice(home: URL) throws -> String {
        if let device = connection.device { return device }
        guard FileManager.default.fileExists(atPath: home.appendingPathComponent("device").path) else {
            fail("simp: \(connection.user) has no device on this machine yet (its first simp chat, listen or send makes one, with its keys)")
        }
        do { return try DeviceName.standard(home: home) } catch { fail("simp: \(error)") }
    }
}
