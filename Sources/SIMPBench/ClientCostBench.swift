import Foundation
import NIOConcurrencyHelpers
import NIOCore
import SIMPClient
import SIMPCore

#if canImport(Glibc)
import Glibc
#endif

/// `simp-bench client`: the CPU the reference client (`SIMPClient`, the code `simp` runs)
/// spends per message, with end-to-end encryption (docs/E2E.md) and without, in one run.
///
/// Each round connects two fresh users through a relay, warms their sessions up with one
/// message each way (with end to end: the key fetch and the session start), then sends
/// `messages` TEXT messages at a fixed `rate` and waits until every one is receipted and
/// delivered. Each `SIMPClient` runs on its own event loop thread, where it seals, opens,
/// encrypts, decrypts and saves its end-to-end state, so the CPU time of each client's thread
/// over the window is that client's cost. Plain and end-to-end rounds alternate, so load from
/// other processes hits both alike.
public enum ClientCostBench {
    /// Who sends: alice to bob only (each message advances the sending chain: one symmetric
    /// ratchet step per message), or alice and bob taking turns (each message then also makes
    /// a Diffie-Hellman ratchet step, the most a conversation can cost).
    public enum Pattern: String, Codable, Sendable, CaseIterable {
        case oneWay = "one-way"
        case alternating
    }

    public struct Options: Sendable {
        public var messages = 2_000
        public var rounds = 3
        /// Messages per second offered (the same for both modes, so wake-ups are alike).
        public var rate = 500.0
        /// Characters of text per message.
        public var textLength = 100
        public var pattern = Pattern.oneWay
        /// Clients keep an outbox, as `simp`'s do (docs/E2E.md §15: a message leaves once it is
        /// durable there, one `fdatasync` per burst of submissions), in both modes.
        public var outbox = false
        public init() {}
    }

    /// Measures with a relay the bench starts from `relayBinary` (and a private Redis).
    public static func run(options: Options, relayBinary: URL) async throws -> ClientCostReport {
        let relay = try await LocalRelay.start(binary: relayBinary, redis: nil)
        do {
            let report = try await run(options: options, relay: RelayUnderTest(port: relay.controlPort, pid: relay.pid))
            await relay.stop()
            return report
        } catch {
            await relay.stop()
            throw error
        }
    }

    /// The relay the clients use: its control port on 127.0.0.1 and, when it is a process of
    /// its own, its process id (for its CPU time).
    struct RelayUnderTest {
        var port: Int
        var pid: Int32?
    }

    static func run(options: Options, relay: RelayUnderTest) async throws -> ClientCostReport {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("simp-bench-client-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let loadBefore = LoadAverage.read()
        var samples: [Bool: [ClientCostReport.Row]] = [false: [], true: []]
        for round in 0..<options.rounds {
            // Plain first in even rounds, end to end first in odd ones.
            for endToEnd in round.isMultiple(of: 2) ? [false, true] : [true, false] {
                let sample = try await measure(endToEnd: endToEnd, round: round, relay: relay, home: home, options: options)
                samples[endToEnd]!.append(sample)
            }
        }
        return ClientCostReport(
            options: options, machine: .current(), loadAverage: [loadBefore, LoadAverage.read()],
            rows: [ClientCostReport.Row.median(of: samples[false]!), ClientCostReport.Row.median(of: samples[true]!)])
    }

    /// One round of one mode: two fresh users, warm-up, then the measured window.
    static func measure(endToEnd: Bool, round: Int, relay: RelayUnderTest, home: URL, options: Options) async throws -> ClientCostReport.Row {
        let suffix = "\(endToEnd ? "e2e" : "plain")-\(round)-\(UInt32.random(in: 0...UInt32.max))"
        let outboxHome = options.outbox ? home : nil
        let alice = try await connect("alice-\(suffix)", relay: relay, endToEndHome: endToEnd ? home : nil, outboxHome: outboxHome)
        let bob: SIMPClient
        do {
            bob = try await connect("bob-\(suffix)", relay: relay, endToEndHome: endToEnd ? home : nil, outboxHome: outboxHome)
        } catch {
            await alice.close()
            throw error
        }
        do {
            let row = try await measureWindow(alice: alice, bob: bob, endToEnd: endToEnd, relay: relay, options: options)
            await alice.close()
            await bob.close()
            return row
        } catch {
            await alice.close()
            await bob.close()
            throw BenchError("\(endToEnd ? "end-to-end" : "plain") round \(round): \(error)")
        }
    }

    static func measureWindow(alice: SIMPClient, bob: SIMPClient, endToEnd: Bool, relay: RelayUnderTest, options: Options) async throws
        -> ClientCostReport.Row
    {
        let (aliceInbox, bobInbox) = (DeliveryCounter(alice), DeliveryCounter(bob))
        let aliceLoop = try await warmUp(from: alice, to: bob.configuration.user, inbox: bobInbox)
        let bobLoop = try await warmUp(from: bob, to: alice.configuration.user, inbox: aliceInbox)

        let before = try await CPUReading.take(aliceLoop, bobLoop, relay: relay)
        var results: [EventLoopFuture<SendResult>] = []
        let start = NIODeadline.now()
        for index in 0..<options.messages {
            let wait = start + .nanoseconds(Int64(Double(index) * 1e9 / options.rate)) - .now()
            if wait > .zero { try await Task.sleep(nanoseconds: UInt64(wait.nanoseconds)) }
            let (sender, receiver) = options.pattern == .alternating && index % 2 == 1 ? (bob, alice) : (alice, bob)
            let text = "message \(index) ".padding(toLength: options.textLength, withPad: "x", startingAt: 0)
            results.append(try await sender.submit(SIMPMessage(kind: .text, toUser: receiver.configuration.user, content: text)).result)
        }
        var notDelivered = 0
        for result in results {
            if case .delivered = try await result.get() {} else { notDelivered += 1 }
        }
        let toAlice = options.pattern == .alternating ? options.messages / 2 : 0
        let aliceGotHers = await aliceInbox.wait(for: toAlice + 1)
        let bobGotHis = await bobInbox.wait(for: options.messages - toAlice + 1)
        let arrived = aliceGotHers && bobGotHis
        let after = try await CPUReading.take(aliceLoop, bobLoop, relay: relay)
        let seconds = Double((NIODeadline.now() - start).nanoseconds) / 1e9
        guard notDelivered == 0, arrived else { throw BenchError("\(notDelivered) of \(options.messages) messages not delivered") }
        // Every message of the mode, warm-ups included, came as the mode says (else the figures lie).
        let sealed = aliceInbox.endToEnd + bobInbox.endToEnd
        guard sealed == (endToEnd ? options.messages + 2 : 0) else {
            throw BenchError("\(sealed) of \(options.messages + 2) messages arrived end-to-end encrypted")
        }
        return ClientCostReport.Row(endToEnd: endToEnd, messages: options.messages, seconds: seconds, before: before, after: after)
    }

    static func connect(_ user: String, relay: RelayUnderTest, endToEndHome: URL?, outboxHome: URL? = nil) async throws -> SIMPClient {
        var configuration = ClientConfiguration(serverHost: "127.0.0.1", serverPort: relay.port, user: user)
        configuration.endToEnd = endToEndHome.map { EndToEndSettings(home: $0) }
        configuration.outbox = try outboxHome.map { try Outbox(home: $0, user: user, device: "bench") }
        let client = SIMPClient(configuration: configuration)
        try await client.connect()
        return client
    }

    /// Sends one message and waits for it (with end to end: the key fetch and the session
    /// start, which the window leaves out); returns the sender's event loop.
    static func warmUp(from sender: SIMPClient, to user: String, inbox: DeliveryCounter) async throws -> any EventLoop {
        let result = try await sender.submit(SIMPMessage(kind: .text, toUser: user, content: "warm-up")).result
        guard case .delivered = try await result.get(), await inbox.wait(for: 1) else {
            throw BenchError("the warm-up message to \(user) was not delivered")
        }
        return result.eventLoop
    }
}

/// Counts the messages a client hands to the application (its `messages` stream), and those
/// of them that came end-to-end encrypted.
final class DeliveryCounter: Sendable {
    private let counts = NIOLockedValueBox((all: 0, endToEnd: 0))
    private let reader: Task<Void, Never>

    init(_ client: SIMPClient) {
        reader = Task { [counts] in
            for await message in client.messages {
                counts.withLockedValue { $0 = ($0.all + 1, $0.endToEnd + (message.isEndToEnd ? 1 : 0)) }
            }
        }
    }

    deinit { reader.cancel() }

    /// How many arrived end-to-end encrypted so far.
    var endToEnd: Int { counts.withLockedValue { $0.endToEnd } }

    /// Whether `total` messages arrived within 30 s.
    func wait(for total: Int) async -> Bool {
        for _ in 0..<3_000 {
            if counts.withLockedValue({ $0.all }) >= total { return true }
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
        return false
    }
}

/// CPU seconds so far of both clients' event loop threads, the bench process and the relay.
struct CPUReading: Sendable {
    var alice: Double
    var bob: Double
    var process: Double
    var relay: Double?

    static func take(_ aliceLoop: any EventLoop, _ bobLoop: any EventLoop, relay: ClientCostBench.RelayUnderTest) async throws -> CPUReading {
        CPUReading(
            alice: try await aliceLoop.submit(threadCPUSeconds).get(), bob: try await bobLoop.submit(threadCPUSeconds).get(),
            process: processCPUSeconds(), relay: relay.pid.flatMap { ProcessStats.read(pid: $0)?.cpuSeconds })
    }

    /// The calling thread's CPU time (user + system).
    @Sendable static func threadCPUSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
}

/// The 1-minute load average (/proc/loadavg), to say how busy the shared machine was.
enum LoadAverage {
    static func read() -> Double {
        let text = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? ""
        return Double(text.split(separator: " ").first ?? "") ?? .nan
    }
}
