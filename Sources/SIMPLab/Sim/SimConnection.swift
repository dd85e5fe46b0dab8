import NIOCore
import NIOEmbedded
import SIMPCore

/// A control connection between a simulated client and the relay: two TCP streams over the
/// client's access link, carrying the bytes the relay's real framing handlers read and write.
final class SimConnection {
    /// The client's TCP peer address as the relay sees it.
    let peer: SocketAddress
    unowned let client: SimClient
    private(set) var up: SimTCPStream!
    private(set) var down: SimTCPStream!
    /// The relay's end of the connection (its real control handlers), once it accepted it.
    var relayEnd: EmbeddedChannel?
    /// Whether the client closed it (the relay then has nothing to tell the client).
    var closedByClient = false
    /// Bytes from the relay not yet read as a whole frame.
    private var unframed = ByteBuffer()

    init(peer: SocketAddress, client: SimClient, relay: SimRelay, queue: EventQueue) {
        self.peer = peer
        self.client = client
        up = SimTCPStream(forward: client.up, reverse: client.down, queue: queue) { [unowned relay, unowned self] bytes in
            relay.controlBytesArrived(bytes, on: self)
        }
        down = SimTCPStream(forward: client.down, reverse: client.up, queue: queue) { [unowned self] bytes in
            framesArrived(bytes)
        }
    }

    /// The client writes `message` as one frame.
    func send(_ message: SIMPMessage) {
        var frame = ByteBuffer()
        Framing.writeFrame(message, into: &frame)
        up.send(frame)
    }

    /// The client reads whole frames from what the relay wrote.
    private func framesArrived(_ bytes: ByteBuffer) {
        var bytes = bytes
        unframed.writeBuffer(&bytes)
        while let payload = try? Framing.nextFrame(in: &unframed, maxFrameSize: Framing.defaultMaxFrameSize),
            let message = try? MessageCodec.decode(payload)
        {
            client.controlArrived(message, on: self)
        }
        unframed.discardReadBytes()
    }

    func close() {
        up.close()
        down.close()
    }
}
