import Foundation
import NIOCore
import SIMPCore

/// With `SIMP_FILE_TRACE` set, a file sender's loop prints a line to stderr every 100 ms: the
/// congestion window and its state, the round trips, the pacing interval, and how often the
/// loop woke up and how many chunks each wake-up sent. What limits a transfer's rate is
/// measured from these, not guessed.
struct FileSendTrace {
    let enabled = ProcessInfo.processInfo.environment["SIMP_FILE_TRACE"] != nil
    let start: NIODeadline
    private var last: NIODeadline
    private var wakeUps = 0
    private var sends = 0
    private var chunks = 0

    init(start: NIODeadline) {
        self.start = start
        self.last = start
    }

    mutating func wokeUp() { wakeUps += 1 }

    mutating func sent(_ count: Int, sender: FileSender, now: NIODeadline) {
        guard enabled else { return }
        chunks += count
        if count > 0 { sends += 1 }
        guard now - last >= .milliseconds(100) else { return }
        let span = Double((now - last).nanoseconds) / 1e9
        func ms(_ t: TimeAmount?) -> String { t.map { String(format: "%.2f", Double($0.nanoseconds) / 1e6) } ?? "-" }
        let window = sender.congestion
        let line = String(
            format: "file-trace t=%.2f cwnd=%.1f state=%@ srtt=%@ minrtt=%@ jitter=%@ pace=%@us inflight=%d "
                + "wake/s=%.0f chunks/s=%.0f chunks/send=%.1f acked=%llu losses=%llu delayred=%d\n",
            Double((now - start).nanoseconds) / 1e9, window.window, "\(window.state)", ms(sender.rtt.smoothedRTT), ms(window.minimumRTT),
            ms(window.jitter), String(window.pacingInterval(rtt: sender.rtt.smoothedRTT ?? .milliseconds(50)).nanoseconds / 1000),
            sender.chunksInFlight, Double(wakeUps) / span, Double(chunks) / span, sends > 0 ? Double(chunks) / Double(sends) : 0,
            sender.acknowledged.count, sender.lossesDetected, window.delayReductions)
        FileHandle.standardError.write(Data(line.utf8))
        last = now
        wakeUps = 0
        sends = 0
        chunks = 0
    }
}
