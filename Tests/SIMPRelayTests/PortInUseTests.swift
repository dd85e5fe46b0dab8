import SIMPRelay
import SIMPTestSupport
import XCTest

/// A relay whose port is taken refuses to start and names the port, for UDP as for TCP: two
/// relays sharing a UDP port would each receive only some of the datagrams.
final class PortInUseTests: XCTestCase {
    func testASecondRelayOnTheSameUDPPortRefusesToStart() async throws {
        let first = try await TestRelay.start()
        let udpPort = first.server.datagramAddress!.port!
        var configuration = first.server.configuration
        configuration.relayId += "-second" // its shutdown must not touch the first relay's keys
        configuration.port = 0
        configuration.udpPort = udpPort
        do {
            let second = try await BackgroundRelay.start(configuration: configuration)
            await second.shutdown()
            XCTFail("a second relay started on UDP port \(udpPort)")
        } catch {
            XCTAssertTrue("\(error)".contains("cannot listen on UDP 127.0.0.1:\(udpPort)"), "\(error)")
            XCTAssertTrue("\(error)".contains("in use"), "\(error)")
        }
        await first.stop()
    }

    func testASecondRelayOnTheSameTCPPortRefusesToStart() async throws {
        let first = try await TestRelay.start()
        let tcpPort = first.port
        var configuration = first.server.configuration
        configuration.relayId += "-second" // its shutdown must not touch the first relay's keys
        configuration.port = tcpPort
        configuration.udpPort = 0
        do {
            let second = try await BackgroundRelay.start(configuration: configuration)
            await second.shutdown()
            XCTFail("a second relay started on TCP port \(tcpPort)")
        } catch {
            XCTAssertTrue("\(error)".contains("cannot listen on TCP 127.0.0.1:\(tcpPort)"), "\(error)")
        }
        await first.stop()
    }
}
