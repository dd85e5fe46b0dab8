import NIOCore
import SIMPClient
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// What an on-path observer captures during a chat (control channel through a TCP tap,
/// datagrams through UDP proxies): with TLS on, no chat text, user or room name in clear.
final class WireCaptureTests: XCTestCase {
    func testAChatOverTLSShowsNothingInClear() async throws {
        let certificates = try await TestCertificates.make()
        defer { certificates.remove() }
        let capture = try await captureChat {
            $0.tls = ControlTLSFiles(certificatePath: certificates.certificateFile, keyPath: certificates.keyFile)
        } client: {
            $0.tls = ClientTLS(caFile: certificates.caFile)
        }

        for secret in capture.secrets {
            XCTAssertFalse(capture.control.contains(secret), "\"\(secret)\" in clear on TCP")
            XCTAssertFalse(capture.datagrams.contains(secret), "\"\(secret)\" in clear on UDP")
        }
    }

    /// The same capture without TLS: the control channel shows them (so the capture sees what
    /// passes), the datagrams still do not.
    func testWithoutTLSTheControlChannelShowsNamesButDatagramsDoNot() async throws {
        let capture = try await captureChat { _ in
        } client: { _ in
        }

        XCTAssertTrue(capture.secrets.contains { capture.control.contains($0) }, "a plain control channel carries user names")
        for secret in capture.secrets {
            XCTAssertFalse(capture.datagrams.contains(secret), "\"\(secret)\" in clear on UDP")
        }
    }

    private struct Capture {
        var secrets: [String]
        var control: String
        var datagrams: String
    }

    /// alice and bob join a room, chat directly and in the room, and ask about each other's
    /// presence, each through a TCP tap and a UDP proxy.
    private func captureChat(
        relay configureRelay: (inout RelayConfiguration) -> Void, client configureClient: @escaping (inout ClientConfiguration) -> Void
    ) async throws -> Capture {
        let relay = try await TestRelay.start(configure: configureRelay)
        let tap = try await TCPTap.start(target: relay.server.controlAddress!)
        let aliceProxy = try await DatagramProxy.start(target: relay.server.datagramAddress!) { _, _ in 1 }
        let bobProxy = try await DatagramProxy.start(target: relay.server.datagramAddress!) { _, _ in 1 }
        let aliceName = TestRelay.uniqueUser("alice"), bobName = TestRelay.uniqueUser("bob"), room = "garden-\(UInt32.random(in: 0 ... .max))"
        let text = "meet me by the old oak at noon", post = "bring the blue umbrella"
        func connect(_ user: String, _ proxy: DatagramProxy) async throws -> SIMPClient {
            try await relay.connectClient(user: user) {
                $0.serverPort = tap.address.port!
                $0.datagramTarget = proxy.address
                configureClient(&$0)
            }
        }
        let bob = try await connect(bobName, bobProxy)
        let bobInbox = MessageInbox(bob)
        let alice = try await connect(aliceName, aliceProxy)
        _ = try await bob.joinRoom(room)
        _ = try await alice.joinRoom(room)
        guard case .delivered = try await alice.send(text: text, to: bobName) else { throw CaptureError() }
        _ = try await alice.send(text: post, toRoom: room)
        _ = try await bob.who([aliceName])
        let bothArrived = await bobInbox.waitFor(2) // the room post too: its datagrams passed the proxies
        XCTAssertTrue(bothArrived)

        let control = String(decoding: tap.recorded, as: UTF8.self)
        let datagrams = String(decoding: try await aliceProxy.recordedBytes() + bobProxy.recordedBytes(), as: UTF8.self)
        XCTAssertGreaterThan(tap.recorded.count, 500, "the tap saw the control traffic")
        XCTAssertGreaterThan(datagrams.utf8.count, 100, "the proxies saw the datagrams")
        await aliceProxy.stop()
        await bobProxy.stop()
        await relay.stop()
        await tap.stop()
        return Capture(secrets: [text, post, aliceName, bobName, room], control: control, datagrams: datagrams)
    }

    private struct CaptureError: Error {}
}
