import NIOCore
import SIMPCore

/// Devices that go offline and come back, and one-shot send-only sessions, in virtual time.
extension SimWorld {
    /// Schedules every device's offline windows and every one-shot session, from the workload start.
    func scheduleDeviceLifecycles() {
        for (member, client) in lineup {
            for window in member.offline {
                lifecycleEventsDue += 2
                queue.schedule(after: Self.ms(window.atMs)) { [unowned self] in
                    lifecycleEventsDue -= 1
                    client.stop()
                }
                queue.schedule(after: Self.ms(window.atMs + window.forMs)) { [unowned self] in
                    lifecycleEventsDue -= 1
                    client.start()
                }
            }
            if let oneShot = member.oneShot {
                let (session, to) = oneShot
                lifecycleEventsDue += 1
                queue.schedule(after: Self.ms(session.atMs)) { [unowned self] in
                    lifecycleEventsDue -= 1
                    runOneShot(client, messages: session.messages, to: to)
                }
            }
        }
    }

    /// A one-shot session starts, hands over its messages (they go out once it is connected)
    /// and leaves when each has its outcome.
    private func runOneShot(_ client: SimClient, messages: Int, to user: String) {
        client.leavesWhenDone = true
        client.start()
        for _ in 0..<messages {
            let sequence = oneShotSequences[client.user, default: 0]
            oneShotSequences[client.user] = sequence + 1
            submitted += 1
            client.submit(text: MessageText.make(sequence: sequence, payloadBytes: scenario.workload.payloadBytes), to: user)
        }
    }

    private static func ms(_ value: Double) -> TimeAmount { .nanoseconds(Int64(value * 1e6)) }
}
