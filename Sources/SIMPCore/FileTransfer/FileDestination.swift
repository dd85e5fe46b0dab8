/// Where a file's chunks go, decided by what became of its announcement (docs/PROTOCOL.md §5.6,
/// §5.7), and which acknowledgements the transfer then follows.
///
/// - The announcement was **delivered** (the receiver has one device, online): the chunks go to
///   that device live (FILE_CHUNK), and its FILE_ACKs drive the transfer.
/// - It was **stored** (the receiver is offline, or has several devices): the chunks go to the
///   relay to hold (FILE_UPLOAD), and only the relay's FILE_ACKs (`fileHeld`) drive the
///   transfer. Every device of the receiver then gets the file from the relay: a device online
///   as each chunk is stored, one offline when it connects. With `receiverOnline` some device is
///   online; if the relay will not hold the file (over its limits), the file goes live instead,
///   to the devices online only.
public enum FileDestination: Equatable, Sendable {
    /// Live, to the receiver's device.
    case receiver
    /// Uploaded to the relay, which holds it for every device of the receiver.
    case relay(receiverOnline: Bool)

    /// The destination for an announcement stored by the relay (or delivered, when not
    /// `stored`); `receiverOnline`: the relay said some device of the receiver is online.
    public init(announcementStored stored: Bool, receiverOnline: Bool) {
        self = stored ? .relay(receiverOnline: receiverOnline) : .receiver
    }

    /// Whether chunks are uploaded (FILE_UPLOAD) rather than sent live (FILE_CHUNK).
    public var uploads: Bool { if case .relay = self { true } else { false } }

    /// Whether `ack` is one this transfer follows: the relay's (`fileHeld`) when uploading, the
    /// receiver's otherwise. The others are about the same file's other path (a receiving device
    /// acknowledging chunks the relay passed on; the relay refusing chunks still in flight after
    /// the transfer went live) and are ignored.
    public func follows(_ ack: SIMPMessage) -> Bool { ack.fileHeld == uploads }

    /// The destination after the relay refused to hold the file: live to the receiver's devices
    /// online, when some are (its devices offline will not get it); nil when none is (the
    /// transfer fails with the relay's reason).
    public var afterRelayRefused: FileDestination? { self == .relay(receiverOnline: true) ? .receiver : nil }
}
