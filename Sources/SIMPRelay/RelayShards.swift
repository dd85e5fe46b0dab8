import NIOCore
import NIOPosix
import SIMPCore
import ServiceLifecycle

/// A relay on several event loops (`simp-server --threads N`): N relay cores, one per loop,
/// each a `RelayService` with its own relay id (`<id>-t<k>`), store connection and session
/// id class, all listening on the same TCP and UDP ports. The kernel spreads control
/// connections over the TCP listeners and steers every datagram to the loop holding its
/// session (`ReusePortSteering`); what one loop's user sends another's crosses in-process
/// (`SiblingRelays`), never through Redis. With one thread it is exactly one `RelayService`.
public final class RelayShards: Service, Sendable {
    public let configuration: RelayConfiguration
    public let relays: [RelayService]
    private let group: EventLoopGroup

    /// `configuration.threads` relays on loops of `group` (one each, in turn). `store` serves a
    /// single relay (tests, the simulator); several relays each get their own Redis connection.
    public init(configuration: RelayConfiguration, group: EventLoopGroup, store: (any RelayStore)? = nil) {
        self.configuration = configuration
        self.group = group
        let count = max(1, configuration.threads)
        guard count > 1 else {
            relays = [RelayService(configuration: configuration, group: group, store: store)]
            return
        }
        let siblings = SiblingRelays()
        relays = (0..<count).map { index in
            var shard = configuration
            shard.relayId = "\(configuration.relayId)-t\(index)"
            shard.shard = SessionIdClass(index: UInt32(index), count: UInt32(count))
            if index > 0 { shard.metricsPort = nil } // one /metrics endpoint: the counters are process-wide
            let loop = group.next()
            let store = SiblingAwareStore(
                base: RedisRelayStore(
                    endpoint: shard.redisEndpoint, limits: shard.storeLimits,
                    logger: shard.logger, eventLoop: loop), siblings: siblings)
            return RelayService(configuration: shard, group: loop, store: store)
        }
    }

    /// Where the relays listen (the same ports for all), once `run()` has bound every one;
    /// throws what stopped any of them from starting.
    public func addresses() async throws -> RelayAddresses {
        for relay in relays.dropFirst() { _ = try await relay.addresses() }
        return try await relays[0].addresses()
    }

    /// Runs every relay until graceful shutdown. The ports are checked free first (a socket
    /// without `SO_REUSEPORT` binds them once), so the relays never join another process's
    /// port group; port 0 becomes the port that probe got.
    public func run() async throws {
        guard relays.count > 1 else { return try await relays[0].run() }
        let ports: ListeningPorts
        do { ports = try await PortProbe.reserve(configuration, on: group.next()) } catch {
            for relay in relays { relay.didNotStart(error) }
            throw error
        }
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for (index, relay) in relays.enumerated() {
                tasks.addTask { try await relay.run(ports: ports) }
                let bound: RelayAddresses
                do { bound = try await relay.addresses() } catch { // bound in order: socket k is the steering program's index k
                    for later in relays[(index + 1)...] { later.didNotStart(error) }
                    break
                }
                do { try ports.check(bound) } catch { // the relays bound so far stop (cancelled)
                    for later in relays[(index + 1)...] { later.didNotStart(error) }
                    throw error
                }
            }
            try await tasks.waitForAll()
        }
    }
}

/// The ports the relays of one process share: the control ports (the configured `port` first,
/// then `additionalPorts`) and the UDP port.
struct ListeningPorts: Sendable {
    var tcp: [Int]
    var udp: Int

    /// Throws unless a relay bound exactly these ports: one on a port of its own would take
    /// no part in the port's steering, and the datagrams of its sessions sent to the shared
    /// port would reach a relay that does not know them.
    func check(_ bound: RelayAddresses) throws {
        let boundTCP = bound.allControl.map { $0.port ?? -1 }
        let boundUDP = bound.datagram.port ?? -1
        guard boundTCP == tcp, boundUDP == udp else {
            throw RelayStartError("a relay thread bound TCP \(boundTCP) and UDP \(boundUDP), not the shared TCP \(tcp) and UDP \(udp)")
        }
    }
}

/// Free TCP and UDP ports for the relays of one process.
enum PortProbe {
    /// Binds the configured ports (0: any) without `SO_REUSEPORT` and lets them go: a port
    /// held by any socket (not connections in TIME_WAIT) fails here with the usual "in use" error.
    static func reserve(_ configuration: RelayConfiguration, on loop: EventLoop) async throws -> ListeningPorts {
        var held: [Channel] = []
        do {
            var tcpPorts: [Int] = []
            for port in [configuration.port] + configuration.additionalPorts {
                let tcp = try await ServerBootstrap(group: loop).serverChannelOption(.socketOption(.so_reuseaddr), value: 1) // TIME_WAIT is no owner
                    .bind(host: configuration.host, port: port).get()
                held.append(tcp)
                tcpPorts.append(tcp.localAddress?.port ?? port)
            }
            let udpWanted = configuration.udpPort ?? (configuration.port == 0 ? 0 : tcpPorts[0] + 1)
            let udp = try await DatagramBootstrap(group: loop).bind(host: configuration.host, port: udpWanted).get()
            held.append(udp)
            // Read before closing: NIO forgets a channel's address just after its close
            // future completes, so read after it the port was sometimes nil, and with port 0
            // every relay bound a UDP port of its own (no steering, datagrams on the wrong loop).
            guard let udpPort = udp.localAddress?.port else { throw RelayStartError("the probed UDP socket has no local address") }
            for channel in held { try? await channel.close() }
            return ListeningPorts(tcp: tcpPorts, udp: udpPort)
        } catch {
            for channel in held { try? await channel.close() }
            throw error
        }
    }
}
