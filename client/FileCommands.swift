import ArgumentParser
import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import Synchronization

/// Where `simp listen`'s message handler finds the downloads (made once the client exists).
/// Announcements that arrive before (stored ones come as soon as the client connects: a file
/// the relay held while this device was offline) wait here and are handed over then.
final class DownloadsBox: Sendable {
    private let box = Mutex<(downloads: FileDownloads?, waiting: [SIMPMessage])>((nil, []))
    var downloads: FileDownloads? {
        get { box.withLock { $0.downloads } }
        set {
            let waiting = box.withLock { box in
                box.downloads = newValue
                defer { box.waiting = [] }
                return box.waiting
            }
            guard let newValue, !waiting.isEmpty else { return }
            Task { for message in waiting { await newValue.offered(message) } }
        }
    }

    /// Hands a file's announcement to the downloads, or keeps it until they exist.
    func offer(_ message: SIMPMessage) {
        let downloads = box.withLock { box in
            if box.downloads == nil { box.waiting.append(message) }
            return box.downloads
        }
        if let downloads { Task { await downloads.offered(message) } }
    }
}

extension Listen {
    /// Starts saving files into `--downloads` (default `$SIMP_HOME/downloads`).
    func startDownloads(_ client: SIMPClient, into box: DownloadsBox) throws {
        let directory = downloads ?? SIMPHome.directory().appendingPathComponent("downloads").path
        let json = self.json
        let downloads = try FileDownloads(
            client: client, directory: directory,
            saved: { file in
                let line: String
                if json {
                    var object: [String: Any] = [
                        "from": file.from,
                        "file": [
                            "name": file.name, "size": file.size, "sha256": file.sha256, "path": file.path, "receivedBefore": file.receivedBefore,
                        ],
                    ]
                    if !file.room.isEmpty { object["room"] = file.room } // sent to that room, both members
                    let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
                    line = String(decoding: data, as: UTF8.self)
                } else {
                    let from = file.room.isEmpty ? file.from : "\(file.from) in #\(file.room)"
                    let outcome = file.receivedBefore ? "sent again: already saved at" : "saved to"
                    line = "file: \(file.name) (\(file.size) bytes, sha256 \(file.sha256)) from \(from) \(outcome) \(file.path)"
                }
                FileHandle.standardOutput.write(Data((line + "\n").utf8))
            },
            failed: { FileHandle.standardError.write(Data("simp: file: \($0)\n".utf8)) })
        box.downloads = downloads
        Task { await downloads.run() }
    }
}

extension Send {
    /// `simp send --to USER --file PATH`: progress on standard error, exit 0 once the receiver
    /// has the file and its digest matched.
    func sendFile(_ path: String, to peer: String) async throws {
        let client = try await connection.connect(sendOnly: true)
        let transfer: FileSend
        do { transfer = try FileSend(client: client, path: path, to: peer) } catch {
            await client.close()
            fail("simp: \(error)")
        }
        let started = Date()
        if transfer.resumes { FileHandle.standardError.write(Data("resuming the transfer of \(path) to \(peer) an earlier run started\n".utf8)) }
        let last = Mutex<FileSend.Progress?>(nil)
        do {
            try await transfer.run { progress in
                last.withLock { $0 = progress }
                FileHandle.standardError.write(Data((progress.line + "\n").utf8))
            }
            if let final = last.withLock({ $0 }) { FileHandle.standardError.write(Data((Self.summaryLine(final) + "\n").utf8)) }
        } catch {
            await client.close()
            fail("simp: \(path): \(error)")
        }
        let seconds = String(format: "%.2f", Date().timeIntervalSince(started))
        let name = URL(fileURLWithPath: path).lastPathComponent
        let final = last.withLock({ $0 })
        if let reason = final?.notHeldBecause {
            FileHandle.standardError.write(
                Data("simp: the relay will not hold \(name) for \(peer)'s devices offline (\(reason)): sent to those online only\n".utf8))
        }
        let line =
            final?.forwarded == true
            ? "file \(name) forwarded from the relay's copy in \(seconds) s; \(peer)'s devices get it from the relay"
            : final?.heldByRelay != true
                ? "file \(name) delivered to \(peer) in \(seconds) s"
                : final?.receiverOnline == true
                    ? "file \(name) stored on the relay in \(seconds) s for \(peer)'s devices: those online get it now, the others when they connect"
                    : "file \(name) stored on the relay in \(seconds) s; \(peer) is offline and will get it when \(peer) connects"
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
        if final?.heldByRelay == true { await tellHeld(name, for: peer, final: final, client: client) }
        await client.close()
    }

    /// The file is on the relay for `peer`'s devices, not yet on one: says so on standard
    /// error (the ✓✓ comes later, to simp chat or simp listen); with `--wait-received`, waits
    /// for the relay's news that a device of `peer` has it and prints it.
    private func tellHeld(_ name: String, for peer: String, final: FileSend.Progress?, client: SIMPClient) async {
        guard waitReceived, let fileId = final?.fileId else {
            return FileHandle.standardError.write(
                Data(
                    ("simp: \(name) is held by the relay for \(peer); ✓✓ shows in simp chat or simp listen when a device of \(peer)'s "
                        + "has it (or wait for it with --wait-received)\n").utf8))
        }
        FileHandle.standardError.write(
            Data("simp: \(name) is held by the relay for \(peer); waiting until a device of \(peer)'s has it (Ctrl-C stops waiting)\n".utf8))
        for await notice in client.notices {
            guard var news = FileReceivedNews(notice), news.fileId == fileId else { continue }
            news.name = name
            return FileHandle.standardOutput.write(Data((news.line + "\n").utf8))
        }
    }

    /// `simp send --room ROOM --file PATH`: to each member who reads the room, one transfer
    /// each (the members offline share one upload); progress and what was sent on standard
    /// error; exit 0 once every one has the file or the relay holds it for them, 1 naming those
    /// who could not get it.
    func sendFile(_ path: String, toRoom room: String, join: Bool) async throws {
        let client = try await connection.connect(sendOnly: true)
        if join {
            do { _ = try await client.joinRoom(room) } catch {
                await client.close()
                fail("simp: cannot join #\(room): \(error)")
            }
        }
        let started = Date()
        let last = Mutex<RoomFileSend.Progress?>(nil)
        let failures: [(member: String, reason: String)]
        do {
            failures = try await RoomFileSend(client: client, path: path, room: room).run { progress in
                last.withLock { $0 = progress }
                let line = "\(progress.total.line), \(progress.membersDone) of \(progress.members) members have it"
                FileHandle.standardError.write(Data((line + "\n").utf8))
            }
        } catch {
            await client.close()
            fail("simp: \(path): \(error)")
        }
        await client.close()
        if let final = last.withLock({ $0 }) { FileHandle.standardError.write(Data((Self.summaryLine(final.total) + "\n").utf8)) }
        let (members, held) = last.withLock { ($0?.members ?? 0, $0?.membersHeld ?? 0) }
        let name = URL(fileURLWithPath: path).lastPathComponent
        for failure in failures { FileHandle.standardError.write(Data("simp: \(name) not sent to \(failure.member): \(failure.reason)\n".utf8)) }
        let seconds = String(format: "%.2f", Date().timeIntervalSince(started))
        let onRelay = held == 0 ? "" : "; the relay holds it for \(held) of them (uploaded once), whose devices get it when they connect"
        FileHandle.standardOutput.write(
            Data("file \(name) delivered to \(members - failures.count) of \(members) members of #\(room) in \(seconds) s\(onRelay)\n".utf8))
        if !failures.isEmpty { throw ExitCode(1) }
    }

    /// `sent 21012300 bytes for 20000000 (+5.1 %), 920 chunks again (900 lost, 2 timeouts), largest window 1100000 bytes`.
    static func summaryLine(_ progress: FileSend.Progress) -> String {
        let extra = progress.size > 0 ? (Double(progress.bytesSent) / Double(progress.size) - 1) * 100 : 0
        return "sent \(progress.bytesSent) bytes for \(progress.size) (" + String(format: "%+.1f %%", extra)
            + "), \(progress.retransmissions) chunks again (\(progress.losses) lost, \(progress.timeouts) timeouts), "
            + "largest window \(progress.largestWindowBytes) bytes"
    }
}
