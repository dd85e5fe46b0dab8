import NIOCore
import NIOEmbedded
import SIMPCore

/// A control connection between a simulated client and the relay: two TCP streams over the
/// client's access link, carrying the bytes the real framing handlers of both ends write (the
/// client engine's channel and the relay engine's).
final class SimConnection {
    /// The client's TCP peer address as the relay sees it.
    let peer: SocketAddress
    unowned let client: SimClient
    private(set) var up: SimTCPStream!
    private(set) var down: SimTCPStream!
    /// The relay's end of the connection (its real control handlers), once it accepted it.
    var relayEnd: EmbeddedChannel?
    /// The client's end: the client engine's control channel, and the client process it is of.
    var clientEnd: EmbeddedChannel?
    var clientProcess = 0
    /// Whether the client closed it (the relay then has nothing to tell the client).
    var closedByClient = false
    /// Whether the streams stopped (either end closed).
    private(set) var isClosed = false

    init(peer: SocketAddress, client: SimClient, relay: SimRelay, queue: EventQueue) {
        self.peer = peer
        self.client = client
        up = SimTCPStream(forward: client.up, reverse: client.down, queue: queue) { [unowned relay, unowned self] bytes in
            relay.controlBytesArrived(bytes, on: self)
        }
        down = SimTCPStream(forward: client.down, reverse: client.up, queue: queue) { [unowned client, unowned self] bytes in
            client.controlBytesArrived(bytes, on: self)
        }
    }

    func close() {
        isClosed = true
        up.close()
        down.close()
    }
}
