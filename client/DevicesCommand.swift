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
            `simp devices approve NAME` (NAME as `-- a new device "NAME" logged in as you` said). \
            Approve only a device you just logged in yourself.
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
            var connection = self.connection
            let device = try connection.device ?? DeviceName.standard(home: SIMPHome.directory())
            connection.device = device
            let client = try await connection.connect(sendOnly: true, configure: { $0.endToEnd?.existingKeysOnly = true })
            do {
                let approved = try await client.removeDevice(name)
                await client.close()
                print("\(name) is removed; \(connection.user)'s devices now: \(approved.joined(separator: ", "))")
            } catch {
                await client.close()
                fail("simp: cannot remove \(name): \(error)")
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
            var connection = self.connection
            let device = try connection.device ?? DeviceName.standard(home: SIMPHome.directory())
            connection.device = device
            let client = try await connection.connect(sendOnly: true, configure: { $0.endToEnd?.existingKeysOnly = true })
            do {
                try await client.resetUserKey()
                await client.close()
                print("\(connection.user) has a new user key, held by \(device), which approves \(device) alone")
            } catch {
                await client.close()
                fail("simp: cannot make a new user key: \(error)")
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

        func run() async throws {
            let home = SIMPHome.directory()
            var connection = self.connection
            let device = try connection.device ?? DeviceName.standard(home: home)
            connection.device = device
            if let pid = DeviceLock.holder(home: home, user: connection.user, device: device) {
                fail("simp: device \"\(device)\" of \(connection.user) is in use by a running simp (process \(pid)): run this after it exits")
            }
            let client = try await connection.connect(sendOnly: true, configure: { $0.endToEnd?.existingKeysOnly = true })
            do {
                let approved = try await client.approveDevice(name)
                await client.close()
                print("\(name) is approved; \(connection.user)'s devices now: \(approved.joined(separator: ", "))")
            } catch {
                await client.close()
                fail("simp: cannot approve \(name): \(error)")
            }
        }
    }
}
