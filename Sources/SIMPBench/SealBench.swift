import Foundation
import NIOCore
import SIMPCore

/// `simp-bench seal`: the cost of the datagram seal on the relay's path (open what the sender
/// sealed, seal the payload again for the receiver), for the seal in use and the ones it was
/// chosen against, in one run.
public enum SealBench {
    /// The seals measured, in the order reported.
    static let variants: [(name: String, make: @Sendable (SessionKeys) -> any BenchSeal)] = [
        ("hmac-sha256 (previous seal, 0xA1)", { HMACSeal(keys: $0) }),
        ("aes-256-gcm, swift-crypto one-shot (until now)", { OneShotAESGCMSeal(keys: $0) }),
        ("aes-256-gcm, key per session (in use, 0xA2)", { AESGCMSeal(keys: $0) }),
        ("aes-256-gcm, key per session, open in place", { AESGCMInPlaceSeal(keys: $0) }),
        ("chacha20-poly1305 (alternative)", { ChaChaPolySeal(keys: $0) }),
    ]

    /// Measures every variant `rounds` times over `datagrams` datagrams of a `payloadSize`-byte
    /// TEXT payload; variants alternate within a round so that load from other processes hits
    /// them alike. `allocations`, when given, returns the calling thread's heap allocations so far.
    public static func run(
        payloadSize: Int = 200, datagrams: Int = 20_000, rounds: Int = 5, allocations: (() -> Int)? = nil
    ) throws -> SealBenchReport {
        let payload = textPayload(size: payloadSize)
        let keys = SessionKeys(sessionId: 1, secret: Array(repeating: 7, count: 32))
        var samples = Array(repeating: [Double](), count: variants.count)
        var allocated = Array(repeating: Double?.none, count: variants.count)
        for _ in 0..<rounds {
            for (index, variant) in variants.enumerated() {
                var sender = variant.make(keys)
                var relay = variant.make(keys)
                var sealed: [ByteBuffer?] = (0..<datagrams).map { _ in sender.seal(payload: payload) }
                let allocationsBefore = allocations?()
                let start = NIODeadline.now()
                var forwardedBytes = 0
                for index in sealed.indices {
                    // Handed over as the relay gets it from its socket: no other reference.
                    var datagram = sealed[index].take()!
                    guard let opened = relay.open(&datagram) else { throw SealBenchError.refused(variant.name) }
                    forwardedBytes += relay.seal(payload: opened).readableBytes
                }
                let elapsed = NIODeadline.now() - start
                if let allocationsBefore, let after = allocations?() {
                    allocated[index] = Double(after - allocationsBefore) / Double(datagrams)
                }
                guard forwardedBytes == datagrams * (payload.readableBytes + SealedDatagram.overhead) else {
                    throw SealBenchError.refused(variant.name)
                }
                samples[index].append(Double(elapsed.nanoseconds) / Double(datagrams))
            }
        }
        let rows = variants.indices.map { index in
            let sorted = samples[index].sorted()
            return SealBenchReport.Row(
                seal: variants[index].name, bestNanoseconds: sorted[0], medianNanoseconds: sorted[sorted.count / 2],
                allocations: allocated[index])
        }
        return SealBenchReport(
            payloadSize: payload.readableBytes, datagrams: datagrams, rounds: rounds, machine: .current(), rows: rows)
    }

    /// An encoded TEXT message of `size` bytes (or one more, where the content's length prefix grows).
    static func textPayload(size: Int) -> ByteBuffer {
        var message = SIMPMessage(kind: .text, messageId: 1_700_000_000_000_000, fromUser: "alice", toUser: "bob", content: "")
        message.attempt = 1
        while MessageCodec.encodedSize(of: message) < size { message.content += "x" }
        return MessageCodec.encode(message)
    }
}

enum SealBenchError: Error, CustomStringConvertible {
    case refused(String)
    var description: String {
        switch self {
        case .refused(let seal): return "\(seal): a datagram the bench sealed was refused"
        }
    }
}

/// What `simp-bench seal` reports: a table, or with `--json` one JSON object.
public struct SealBenchReport: Codable, Sendable {
    /// One seal's figures, per datagram forwarded (one open and one seal).
    public struct Row: Codable, Sendable {
        public var seal: String
        /// The fastest round.
        public var bestNanoseconds: Double
        public var medianNanoseconds: Double
        /// Heap allocations per datagram, when the bench could count them.
        public var allocations: Double?

        enum CodingKeys: String, CodingKey {
            case seal, bestNanoseconds = "best_ns", medianNanoseconds = "median_ns", allocations
        }
    }

    public var payloadSize: Int
    public var datagrams: Int
    public var rounds: Int
    public var machine: MachineInfo
    public var rows: [Row]

    enum CodingKeys: String, CodingKey {
        case payloadSize = "payload_size", datagrams, rounds, machine, rows
    }

    public func json() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self)
    }

    public func table() -> String {
        var lines = [
            "open + seal per datagram on the relay's path: \(payloadSize)-byte payload, \(datagrams) datagrams × \(rounds) rounds",
            "machine: \(machine.nproc) × \(machine.cpuModel)",
        ]
        let header = ["seal", "best ns", "median ns", "allocations"]
        let cells = rows.map { row in
            [
                row.seal, String(format: "%.0f", row.bestNanoseconds), String(format: "%.0f", row.medianNanoseconds),
                row.allocations.map { String(format: "%.1f", $0) } ?? "n/a",
            ]
        }
        lines += ColumnTable.lines(header: header, rows: cells)
        return lines.joined(separator: "\n")
    }
}
