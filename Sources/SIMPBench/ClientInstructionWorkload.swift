import Foundation
import SIMPClient
import SIMPCore
import SIMPE2E

/// The client's end-to-end work per message for `scripts/bench-guard`: two devices (alice's
/// `desk`, bob's `phone`) with `E2EMessenger` keeping their state in the client's file store
/// (`EndToEndFileStore`) under `directory`, a session started and answered once before
/// counting. Keys come from a seeded generator and the clock is fixed, so a run repeats
/// exactly (file names and sizes included; the system calls are not counted, their user-space
/// side is).
///
/// Phases (each `messages` counted after `warmup` uncounted, 100 bytes of text each):
/// - `client.seal`: alice seals a message for bob and saves her state;
/// - `client.open`: bob opens one of those and saves his (and notes its id, as the client does);
/// - `client.alternating`: alice and bob take turns, so every message is sealed and opened
///   with a Diffie-Hellman ratchet step; both sides counted.
public enum ClientInstructionWorkload {
    public static func run(messages: Int, warmup: Int = 10, directory: URL, marks: InstructionMarks) throws -> [InstructionPhase] {
        var run = try Run(directory: directory)
        marks.startInstrumentation()
        var phases: [InstructionPhase] = []
        var envelopes: [(id: UInt64, envelope: [UInt8])] = []
        phases.append(
            try marks.phase("client.seal", count: messages, warmup: warmup, on: &run) { run, counted in
                let id = run.takeId()
                envelopes.append((id, try marks.measure(if: counted) { try run.alice.seal(run.text, to: "bob") }))
            })
        var next = 0
        phases.append(
            try marks.phase("client.open", count: messages, warmup: warmup, on: &run) { run, counted in
                let (id, envelope) = envelopes[next]
                next += 1
                try marks.measure(if: counted) { try run.open(envelope, id: id, by: \.bob, from: "alice", device: "desk") }
            })
        phases.append(
            try marks.phase("client.alternating", count: messages, warmup: warmup, on: &run) { run, counted in
                let id = run.takeId()
                if id % 2 == 0 {
                    try marks.measure(if: counted) {
                        try run.open(try run.alice.seal(run.text, to: "bob"), id: id, by: \.bob, from: "alice", device: "desk")
                    }
                } else {
                    try marks.measure(if: counted) {
                        try run.open(try run.bob.seal(run.text, to: "alice"), id: id, by: \.alice, from: "bob", device: "phone")
                    }
                }
            })
        return phases
    }

    final class SeededRandom {
        var generator: SplitMix64
        init(seed: UInt64) { generator = SplitMix64(seed: seed) }
    }

    struct Run {
        var alice: E2EMessenger
        var bob: E2EMessenger
        /// The keys' source, seeded (in a box of its own, so that it is not part of `self`).
        let seeded = SeededRandom(seed: 41)
        let text = Array(String(repeating: "m", count: 100).utf8)
        var nextId: UInt64 = 1
        /// A fixed wall clock, milliseconds since the epoch.
        var now: UInt64 = 1_800_000_000_000

        init(directory: URL) throws {
            alice = try E2EMessenger(
                device: "desk", store: EndToEndFileStore(home: directory, user: "alice", device: "desk"), using: &seeded.generator)
            bob = try E2EMessenger(device: "phone", store: EndToEndFileStore(home: directory, user: "bob", device: "phone"), using: &seeded.generator)
            let prekeys = try bob.publishPrekeys(1, using: &seeded.generator)
            let bundle = bob.local.prekeys.bundle(identity: bob.local.identity, oneTimePrekeys: prekeys)
            _ = try alice.updateDevices(of: "bob", bundles: [("phone", bundle)], using: &seeded.generator)
            // The session starts and is answered: what follows is a conversation's steady state.
            try open(try alice.seal(text, to: "bob"), id: takeId(), by: \.bob, from: "alice", device: "desk")
            try open(try bob.seal(text, to: "alice"), id: takeId(), by: \.alice, from: "bob", device: "phone")
        }

        mutating func takeId() -> UInt64 {
            defer { nextId += 1 }
            return nextId
        }

        /// `envelope` opened by `receiver` as the client does (decrypt, save, note the id); an
        /// error unless it holds the text.
        mutating func open(_ envelope: [UInt8], id: UInt64, by receiver: WritableKeyPath<Run, E2EMessenger>, from peer: String, device: String) throws
        {
            now += 1
            let opened = try self[keyPath: receiver].open(envelope, from: peer, now: now, using: &seeded.generator)
            try self[keyPath: receiver].noteDecrypted(id, from: peer, device: device)
            guard opened.plaintext == text, opened.notices.isEmpty else { throw WorkloadError("message \(id) from \(peer) opened as \(opened)") }
        }
    }
}
