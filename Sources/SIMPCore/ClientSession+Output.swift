import NIOCore

extension ClientSession {
    /// What the shell must do after a call.
    public struct Output: Equatable, Sendable {
        /// Datagrams for the relay's UDP port.
        public var datagrams: [SIMPMessage] = []
        /// HELLO probes for the relay's UDP port whatever `ClientSession.datagramPath` says
        /// (`datagrams` go the session's path: UDP, or DATAGRAM frames on the control connection).
        public var udpProbes: [SIMPMessage] = []
        /// The datagrams moved to this path (docs/PROTOCOL.md §5.5): tell the user.
        public var pathChanged: DatagramPath?
        /// Frames for the registered control connection.
        public var controlFrames: [SIMPMessage] = []
        /// Messages for the application, in order. Hand them over before carrying out the rest
        /// of the output: `controlFrames` and `datagrams` may hold their receipts, and a
        /// receipt means the application has the message.
        public var delivered: [SIMPMessage] = []
        /// Outcomes of sent messages.
        public var outcomes: [SenderEvent] = []
        /// Sent messages still without a receipt after `RetransmitPolicy.delayNoticeAfter`
        /// (still being sent; their outcome comes later).
        public var delayed: [DelayedMessage] = []
        /// News about messages stored for offline receivers (stored, delivered later, discarded),
        /// room progress and read markers.
        public var notices: [DeliveryNotice] = []
        /// News about peers: typing, presence.
        public var peerEvents: [PeerEvent] = []
        /// File datagrams (FILE_CHUNK, FILE_ACK) for the application's file transfers
        /// (docs/PROTOCOL.md §5.6): never receipted, the transfers acknowledge them themselves.
        public var fileDatagrams: [SIMPMessage] = []
        /// Replies to requests (`request`), and requests that will have none.
        public var replies: [RequestReply] = []
        /// The relay stopped answering: close the control connection (then call `controlLost`).
        public var closeControl = false
        /// Connect again after `delay`; this is attempt number `attempt` since the last success.
        public var reconnect: ReconnectPlan?

        public init() {}

        mutating func absorb(_ sender: SenderOutput) {
            datagrams += sender.transmit
            outcomes += sender.events
            delayed += sender.delayed
        }
    }
}
