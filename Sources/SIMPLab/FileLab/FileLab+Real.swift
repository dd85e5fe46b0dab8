import Foundation
import NIOCore
import SIMPBench

extension FileLab {
    /// Runs `scenario`'s links with real processes and sockets (`simp-lab files --mode real`,
    /// docs/SCENARIOS.md "File transfers in real mode"): the file over a real relay and real
    /// `simp` clients (`RealFileRun`), then over the kernel's TCP between two network namespaces
    /// through the same bottleneck and links (`RealTCPTransfer`). Where the machine cannot make
    /// the namespaces (not root, no /dev/net/tun) the TCP row is skipped with the reason
    /// (`FileLabReport.tcpSkipped`) and SIMP's row still runs. `setup.limit` is wall-clock time
    /// allowed for each transfer.
    public static func runReal(_ scenario: Scenario, seed: UInt64, setup: Setup) async throws -> FileLabReport {
        let path = FilePathSetup(sender: scenario.senderAccess, receiver: scenario.receiverAccess, bottleneck: setup.bottleneck)
        let file = labFile(bytes: setup.fileBytes, seed: seed)
        let simp = try await RealFileRun.run(
            file: file, path: path, chatInterval: setup.chatInterval, chatAloneCount: setup.chatBaselineMessages, seed: seed,
            limit: setup.limit, relayBinary: setup.relayBinary)
        var tcp = TransferResult(
            fileBytes: file.count, completedAfter: nil, payloadBytesSent: 0, wireBytesSent: 0, queueDrops: 0, retransmissions: 0, timeouts: 0,
            largestWindow: 0, lossesTolerated: 0, progress: [], chatLatencies: [])
        var skipped: String?
        do { tcp = try await runRealTCP(scenario, seed: seed, setup: setup) } catch let unavailable as RealTCPUnavailable {
            skipped = unavailable.description
        }
        var report = FileLabReport(
            scenario: scenario.name, seed: seed, fileBytes: setup.fileBytes, bottleneck: setup.bottleneck, lossy: path.isLossy,
            roundTrip: path.meanRoundTrip, simp: simp.transfer, tcp: tcp, chatAlone: simp.chatAlone)
        report.mode = .real
        report.tcpSkipped = skipped
        report.fileIntact = simp.intact
        report.simpFailure = simp.failure
        report.tcpCongestionControl = setup.tcpCongestionControl
        return report
    }

    /// The real mode's TCP row alone: the kernel's TCP between two network namespaces through
    /// `scenario`'s links and `setup`'s bottleneck; throws `RealTCPUnavailable` where the machine
    /// cannot make them.
    public static func runRealTCP(_ scenario: Scenario, seed: UInt64, setup: Setup) async throws -> TransferResult {
        let path = FilePathSetup(sender: scenario.senderAccess, receiver: scenario.receiverAccess, bottleneck: setup.bottleneck)
        return try await RealTCPTransfer.run(
            file: labFile(bytes: setup.fileBytes, seed: seed), path: path, seed: seed, limit: setup.limit,
            congestionControl: setup.tcpCongestionControl)
    }

    /// The `simp-server` built beside the running program (`swift build` puts both products in
    /// one directory), for `Setup.relayBinary`; nil if there is none.
    public static func relayBesideThisProgram() -> URL? {
        let binary = LocalRelay.siblingBinary()
        return FileManager.default.isExecutableFile(atPath: binary.path) ? binary : nil
    }

    /// The file both transfers send: `bytes` seeded random bytes.
    static func labFile(bytes: Int, seed: UInt64) -> [UInt8] {
        var random = SeededRandom(seed: seed, stream: 98)
        var file = [UInt8](repeating: 0, count: bytes)
        file.withUnsafeMutableBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                withUnsafeBytes(of: random.next()) { word in
                    for byte in word where offset < buffer.count {
                        buffer[offset] = byte
                        offset += 1
                    }
                }
            }
        }
        return file
    }
}
