import NIOCore

/// The datagram path (docs/PROTOCOL.md §5.5): a client whose HELLOs get no answer over UDP
/// carries its sealed datagrams in DATAGRAM frames on the control connection, keeps probing
/// UDP with a HELLO now and then, and moves back when the answer arrives over UDP. The rules
/// are `DatagramPathSelector`'s; this wires them to the session's HELLOs, keepalive and sender.
extension ClientSession {
    /// How the session's datagrams (`Output.datagrams`) go to the relay now.
    public var datagramPath: DatagramPath { paths?.path ?? .udp }

    /// Times the datagrams moved to the control connection, and back to UDP.
    public var pathSwitches: (toControl: Int, toUDP: Int) {
        (paths?.switchesToControl ?? 0, paths?.switchesToUDP ?? 0)
    }

    private var hello: SIMPMessage { SIMPMessage(kind: .hello, fromUser: configuration.user) }

    /// Just registered: on UDP the login's HELLOs are the first probe round; on the control
    /// connection a HELLO over it moves the relay's side too, and UDP is probed at once.
    mutating func beginDatagramPath(now: NIODeadline, into output: inout Output) {
        guard paths != nil else { return }
        switch datagramPath {
        case .udp:
            paths!.probeRoundStarted(now: now)
        case .control:
            output.datagrams.insert(hello, at: 0)
            paths!.registeredOverControl(now: now)
            pollDatagramPath(now: now, into: &output)
        }
    }

    /// A HELLO answer arrived over `path`: the HELLOs stop; over UDP while the datagrams go over
    /// the control connection, they come back to UDP, and a PING datagram tells the relay so
    /// (its newest datagram then comes over UDP and is not a HELLO).
    mutating func helloAnswered(over path: DatagramPath, now: NIODeadline) -> Output {
        var output = Output()
        guard path == .udp else { return output }
        updateRegistration { $0.nextHello = nil }
        guard paths?.helloAnswered(over: path, now: now) == true else { return output }
        output.pathChanged = .udp
        output.datagrams.append(SIMPMessage(kind: .ping, fromUser: configuration.user))
        return output
    }

    /// The keepalive: on UDP a probe round (a HELLO, answered: it keeps the NAT mapping open and
    /// finds out whether UDP still works), or a PING without the fallback; nothing on the control
    /// connection (its probes go out on their own schedule).
    mutating func keepAlive(now: NIODeadline, into output: inout Output) {
        guard paths != nil else { return output.datagrams.append(SIMPMessage(kind: .ping, fromUser: configuration.user)) }
        guard datagramPath == .udp, !paths!.isProbing else { return }
        startProbeRound(now: now, into: &output)
    }

    /// A round of HELLO probes over UDP: one now, then every `helloInterval` until answered.
    private mutating func startProbeRound(now: NIODeadline, into output: inout Output) {
        output.datagrams.append(hello)
        let next = Hello(due: now + configuration.helloInterval, attemptsLeft: configuration.helloAttempts - 1)
        updateRegistration { $0.nextHello = next }
        paths?.probeRoundStarted(now: now)
    }

    /// What the path rules want now: a probe round, the move to the control connection (a HELLO
    /// over it, so the relay moves too, and everything unreceipted sent again over it), or a
    /// HELLO probe over UDP (from the control connection, or a loss check's on UDP).
    mutating func pollDatagramPath(now: NIODeadline, into output: inout Output) {
        guard isRegistered, let step = paths?.poll(now: now) else { return }
        switch step {
        case .startProbeRound:
            startProbeRound(now: now, into: &output)
        case .switchedToControl:
            updateRegistration { $0.nextHello = nil }
            output.pathChanged = .control
            output.datagrams.removeAll { $0.kind == .hello } // a UDP HELLO due now: one HELLO, over the new path
            output.datagrams.append(hello)
            output.absorb(sender.retransmitAll(now: now))
        case .probeUDP:
            output.udpProbes.append(hello)
        case .lossCheckProbe:
            output.datagrams.append(hello)
        }
    }

    /// A receipt (frame or datagram copy) for this session's messages: what the sender does, and
    /// on UDP, for the heavy-loss rule, whether each message it settles needed a retransmission.
    mutating func receiptHandled(_ receipt: SIMPMessage, now: NIODeadline) -> SenderOutput {
        let settled = sender.handleReceipt(receipt, now: now)
        guard paths != nil, datagramPath == .udp else { return settled }
        for case .delivered(_, _, _, let attempts) in settled.events { paths!.contentOutcome(lost: attempts > 1, now: now) }
        return settled
    }

    /// Content arrived over UDP: for the heavy-loss rule, a retransmission means an earlier
    /// transmission was lost (on the sender's link or this one).
    mutating func noteArrivalOverUDP(_ message: SIMPMessage, now: NIODeadline) {
        guard paths != nil, datagramPath == .udp else { return }
        paths!.contentOutcome(lost: message.attempt > 1, now: now)
    }

    /// Content went out over UDP: silence from the relay's UDP side after it starts a probe round.
    mutating func noteContentSent(_ output: Output, now: NIODeadline) {
        guard paths != nil, datagramPath == .udp, output.datagrams.contains(where: \.kind.isContent) else { return }
        paths!.contentSent(now: now)
    }
}
