import NIOConcurrencyHelpers
import NIOCore
import SIMPClient

/// Devices that go offline and come back, and one-shot send-only sessions, with real clients:
/// going offline closes the device's client (DISCONNECT, sockets closed), coming back starts a
/// new one behind the same proxies.
extension RealWorld {
    /// Adds a task per device with offline windows and per one-shot session, timed from `start`.
    func addDeviceLifecycles(to tasks: inout ThrowingTaskGroup<Void, Error>, start: NIODeadline) {
        for participant in participants {
            let windows = participant.member.offline
            if !windows.isEmpty {
                tasks.addTask {
                    for window in windows {
                        try await Self.sleep(until: start + Self.ms(window.atMs))
                        await participant.client?.close()
                        try await Self.sleep(until: start + Self.ms(window.atMs + window.forMs))
                        try await self.startProcess(of: participant)
                    }
                }
            }
            if let oneShot = participant.member.oneShot {
                let (session, to) = oneShot
                tasks.addTask {
                    try await Self.sleep(until: start + Self.ms(session.atMs))
                    try await self.runOneShot(participant, messages: session.messages, to: to + "-\(self.seed)", start: start)
                }
            }
        }
    }

    /// A one-shot session logs in, sends its messages, waits until each has its outcome (at
    /// most `RealRun.drainLimit`) and leaves.
    private func runOneShot(_ participant: Participant, messages: Int, to receiver: String, start: NIODeadline) async throws {
        try await startProcess(of: participant)
        guard let client = participant.client else { return }
        _ = followStoredMessages(of: client) // ends when the client closes
        var ids: [UInt64] = []
        for _ in 0..<messages {
            let sequence = oneShotSequences.withLockedValue { sequences in
                defer { sequences[participant.name, default: 0] += 1 }
                return sequences[participant.name, default: 0]
            }
            let text = MessageText.make(sequence: sequence, payloadBytes: scenario.workload.payloadBytes)
            ids.append(try await submit(text, from: client, named: participant.name, to: receiver, start: start))
        }
        let deadline = NIODeadline.now() + RealRun.drainLimit
        while !recorder.withLockedValue({ recorder in ids.allSatisfy { recorder.isResolved($0) } }), NIODeadline.now() < deadline {
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        await client.close() // its final counters stay readable (`RealWorld.senderCounters`)
    }

    private static func ms(_ value: Double) -> TimeAmount { .nanoseconds(Int64(value * 1e6)) }
}
