import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SIMPBench
import SIMPClient
import SIMPCore
import SIMPLocalServers
import SIMPRelay

/// The file lab's SIMP row in real mode: a `BackgroundRelay` beside a private `redis-server`
/// (or, with `relayBinary`, that `simp-server` as a process of its own: `LocalRelay`), and two `SIMPClient`s (end to end, as `simp` runs) each behind a `LinkProxy` with the
/// scenario's links, the sender's with the file lab's bottleneck in front of its up link. First
/// chat messages alone (their usual latency), then the file with `FileSend` and `FileDownloads`,
/// the `simp` client's own, with chat messages beside it. The time counts from the start of
/// `FileSend.run` (the announcement's round trip included) to the receiver's saving of the
/// file, its digest checked; progress is what the receiver acknowledged.
final class RealFileRun: Sendable {
    /// What the run measured.
    struct Outcome {
        var transfer: TransferResult
        var chatAlone: [TimeAmount]
        /// The file the receiver saved has the sent file's bytes (its SHA-256 compared here).
        var intact: Bool
        /// Why the transfer stopped without the file, as the sender or the receiver said it.
        var failure: String?
    }

    private let seed: UInt64
    private let chatInterval: TimeAmount
    private let sentAt = NIOLockedValueBox([String: NIODeadline]())
    private let arrivedAt = NIOLockedValueBox([String: NIODeadline]())
    private let saved = NIOLockedValueBox<(FileDownloads.Saved, NIODeadline)?>(nil)
    private let failures = NIOLockedValueBox([String]())

    private init(seed: UInt64, chatInterval: TimeAmount) {
        self.seed = seed
        self.chatInterval = chatInterval
    }

    /// Sends `file` over `path` after `chatAloneCount` chat messages alone; gives up after `limit`.
    /// The relay runs in this process unless `relayBinary` names a `simp-server` to start.
    static func run(
        file: [UInt8], path: FilePathSetup, chatInterval: TimeAmount, chatAloneCount: Int, seed: UInt64, limit: TimeAmount,
        relayBinary: URL? = nil
    ) async throws -> Outcome {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-lab-files-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let redis = try await LocalRedisServer.start()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let relayGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var proxies: [LinkProxy] = []
        var clients: [SIMPClient] = []
        var relay: BackgroundRelay?
        var relayProcess: LocalRelay?
        func stopAll() async {
            for client in clients { await client.close() }
            for proxy in proxies { await proxy.stop() }
            await relay?.shutdown()
            await relayProcess?.stop()
            await redis.stop()
            try? await group.shutdownGracefully()
            try? await relayGroup.shutdownGracefully()
        }
        do {
            let controlPort: Int
            let datagramAddress: SocketAddress
            if let relayBinary {
                let started = try await LocalRelay.start(binary: relayBinary, redis: .single(redis.url))
                relayProcess = started
                (controlPort, datagramAddress) = (started.controlPort, try SocketAddress(ipAddress: "127.0.0.1", port: started.udpPort))
            } else {
                let started = try await BackgroundRelay.start(configuration: .lab(redis: redis, clients: 2), group: relayGroup)
                relay = started
                (controlPort, datagramAddress) = (started.controlAddress!.port!, started.datagramAddress!)
            }
            let sides: [(AccessLink, Bottleneck?)] = [(path.sender, path.bottleneck), (path.receiver, nil)]
            for (index, (link, bottleneck)) in sides.enumerated() {
                let proxy = try await LinkProxy.start(
                    up: link.up, down: link.down, seed: seed, stream: UInt64(2 * index + 1), relay: datagramAddress, group: group,
                    bottleneck: bottleneck)
                proxies.append(proxy)
                let user = (index == 0 ? "alice-" : "bob-") + "\(seed)"
                let client = SIMPClient(
                    configuration: .lab(
                        user: user, controlPort: controlPort, behind: proxy,
                        endToEndHome: directory.appendingPathComponent("e2e")))
                clients.append(client)
                try await client.connect()
                try await proxy.setClient(client.localDatagramAddress!)
            }
            let run = RealFileRun(seed: seed, chatInterval: chatInterval)
            let outcome = try await run.execute(
                file: file, sender: clients[0], receiver: clients[1], proxies: proxies, directory: directory, chatAloneCount: chatAloneCount,
                limit: limit)
            await stopAll()
            return outcome
        } catch {
            await stopAll()
            throw error
        }
    }

    private func execute(
        file: [UInt8], sender: SIMPClient, receiver: SIMPClient, proxies: [LinkProxy], directory: URL, chatAloneCount: Int, limit: TimeAmount
    ) async throws -> Outcome {
        let receiverName = receiver.configuration.user
        let downloads = try FileDownloads(
            client: receiver, directory: directory.appendingPathComponent("downloads").path,
            saved: { [saved] file in saved.withLockedValue { $0 = (file, .now()) } },
            failed: { [failures] why in failures.withLockedValue { $0.append(why) } })
        Task { await downloads.run() } // ends when the receiver closes
        Task { [arrivedAt] in
            for await message in receiver.messages {
                if message.fileId != 0 {
                    await downloads.offered(message)
                } else {
                    arrivedAt.withLockedValue { $0[message.content] = $0[message.content] ?? .now() }
                }
            }
        }
        let start = NIODeadline.now()
        for proxy in proxies { try await proxy.startClock(at: start) }

        let alone = try await chat("alone", from: sender, to: receiverName, count: chatAloneCount, until: start + limit)
        try await settle(alone, until: .now() + .seconds(10))

        let path = directory.appendingPathComponent("lab-file")
        try Data(file).write(to: path)
        let transfer = try FileSend(client: sender, path: path.path, to: receiverName, home: directory.appendingPathComponent("sender-home"))
        let progress = NIOLockedValueBox([FileSend.Progress]())
        let transferStart = NIODeadline.now()
        let sendFailure = NIOLockedValueBox<String?>(nil)
        let sending = Task {
            do { try await transfer.run { update in progress.withLockedValue { $0.append(update) } } } catch {
                sendFailure.withLockedValue { $0 = "the sender stopped: \(error)" }
            }
        }
        let chatting = Task { [saved] in
            try await chat("during", from: sender, to: receiverName, count: nil, until: transferStart + limit) {
                saved.withLockedValue { $0 == nil } // until the file is saved
            }
        }
        while saved.withLockedValue({ $0 == nil }), failures.withLockedValue({ $0.isEmpty }), sendFailure.withLockedValue({ $0 == nil }),
            NIODeadline.now() < transferStart + limit
        {
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        let during = try await chatting.value
        try await settle(during, until: .now() + .seconds(5))
        let received = saved.withLockedValue { $0 }
        if received != nil { _ = try? await sending.value } // its last progress, once the receiver said done
        let final = progress.withLockedValue { $0.last }
        var points = progress.withLockedValue { updates in
            updates.map { TransferResult.Progress(seconds: Double($0.elapsed.nanoseconds) / 1e9, bytes: $0.bytesAcknowledged) }
        }
        let completedAfter = received.map { $0.1 - transferStart }
        if let completedAfter { points.append(.init(seconds: Double(completedAfter.nanoseconds) / 1e9, bytes: UInt64(file.count))) }
        let traffic = try await proxies[0].upTraffic()
        let result = TransferResult(
            fileBytes: file.count, completedAfter: completedAfter, payloadBytesSent: Int(final?.bytesSent ?? 0),
            wireBytesSent: traffic.bytesOffered, queueDrops: traffic.queueDrops, retransmissions: Int(final?.retransmissions ?? 0),
            timeouts: Int(final?.timeouts ?? 0), largestWindow: Int((final?.largestWindowBytes ?? 0) / UInt64(FileSend.chunkSize)),
            lossesTolerated: 0, progress: points, chatLatencies: latencies(during))
        let intact = received.map { (try? Data(contentsOf: URL(fileURLWithPath: $0.0.path))) == Data(file) } ?? false
        let failure =
            received != nil
            ? nil
            : sendFailure.withLockedValue { $0 } ?? failures.withLockedValue { $0.first.map { "the receiver: \($0)" } }
                ?? "not saved within \(limit.nanoseconds / 1_000_000_000) s"
        return Outcome(transfer: result, chatAlone: latencies(alone), intact: intact, failure: failure)
    }

    /// Sends a chat message every `chatInterval` (`count` of them, or while `going` says so) until
    /// `deadline`; returns their texts.
    private func chat(
        _ label: String, from client: SIMPClient, to receiver: String, count: Int?, until deadline: NIODeadline,
        going: @Sendable () -> Bool = { true }
    ) async throws -> [String] {
        var texts: [String] = []
        let start = NIODeadline.now()
        while NIODeadline.now() < deadline {
            if let count { guard texts.count < count else { break } } else if !going() { break }
            let text = "\(label)-\(seed)-\(texts.count)-".padding(toLength: SIMPFileRun.chatPayload, withPad: "x", startingAt: 0)
            sentAt.withLockedValue { $0[text] = .now() }
            _ = try await client.submit(SIMPMessage(kind: .text, toUser: receiver, content: text))
            texts.append(text)
            try await RealWorld.sleep(until: start + chatInterval * Int64(texts.count))
        }
        return texts
    }

    /// Waits until every one of `texts` arrived, or `deadline`.
    private func settle(_ texts: [String], until deadline: NIODeadline) async throws {
        while NIODeadline.now() < deadline, !arrivedAt.withLockedValue({ arrived in texts.allSatisfy { arrived[$0] != nil } }) {
            try await Task.sleep(nanoseconds: 20_000_000)
        }
    }

    /// The send → arrival latency of each of `texts` that arrived.
    private func latencies(_ texts: [String]) -> [TimeAmount] {
        let sent = sentAt.withLockedValue { $0 }
        let arrived = arrivedAt.withLockedValue { $0 }
        return texts.compactMap { text in
            guard let from = sent[text], let to = arrived[text] else { return nil }
            return to - from
        }
    }
}
