import NIOCore
import SIMPClient
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// TLS on the control channel: a real handshake with a throwaway CA, refusals that say why.
final class ControlTLSTests: XCTestCase {
    private var certificates: TestCertificates!
    private var relay: TestRelay!

    override func setUp() async throws {
        certificates = try await TestCertificates.make()
        relay = try await TestRelay.start { [certificates] in
            $0.tls = ControlTLSFiles(certificatePath: certificates!.certificateFile, keyPath: certificates!.keyFile)
        }
    }

    override func tearDown() async throws {
        await relay?.stop()
        certificates?.remove()
    }

    func testClientsTrustingTheCALogInAndChatOverTLS() async throws {
        let bob = TestRelay.uniqueUser("bob")
        let bobClient = try await relay.connectClient(user: bob) {
            $0.serverHost = "localhost" // verified by name, sent as SNI
            $0.tls = ClientTLS(caFile: self.certificates.caFile)
        }
        let inbox = MessageInbox(bobClient)
        let alice = try await relay.connectClient(user: TestRelay.uniqueUser("alice")) {
            $0.tls = ClientTLS(caFile: self.certificates.caFile) // 127.0.0.1: verified by IP address
        }

        let result = try await alice.send(text: "over TLS", to: bob)

        guard case .delivered = result else { return XCTFail("\(result)") }
        let arrived = await inbox.waitFor(1)
        XCTAssertTrue(arrived)
        let contents = await inbox.messages.map(\.content)
        XCTAssertEqual(contents, ["over TLS"])
    }

    func testAClientWithAnotherCAIsRefusedWithAClearMessage() async throws {
        let other = try await TestCertificates.make(name: "other")
        defer { other.remove() }
        do {
            _ = try await relay.connectClient(user: TestRelay.uniqueUser("alice")) { $0.tls = ClientTLS(caFile: other.caFile) }
            XCTFail("connected although the relay's certificate is not from the trusted CA")
        } catch let error as SIMPClientError {
            guard case .cannotConnect(let reason) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(reason.contains("TLS with 127.0.0.1:\(relay.port) failed"), reason)
            XCTAssertTrue(reason.contains("not signed by the CA in \(other.caFile)"), reason)
        }
    }

    func testTheNameMustMatchTheCertificate() async throws {
        let elsewhere = try await TestCertificates.make(name: "elsewhere", subjectAltName: "DNS:elsewhere.example")
        defer { elsewhere.remove() }
        let misnamed = try await TestRelay.start(redis: relay.redis) {
            $0.tls = ControlTLSFiles(certificatePath: elsewhere.certificateFile, keyPath: elsewhere.keyFile)
        }
        do {
            _ = try await misnamed.connectClient(user: TestRelay.uniqueUser("alice")) { $0.tls = ClientTLS(caFile: elsewhere.caFile) }
            XCTFail("connected although the certificate is not valid for 127.0.0.1")
        } catch SIMPClientError.cannotConnect(let reason) {
            XCTAssertTrue(reason.contains("not valid for 127.0.0.1"), reason)
        }
        await misnamed.stopKeepingRedis()
    }

    /// PROTOCOL §3.5: a DNS name in --server must be among the certificate's DNS names, an IP
    /// address among its IP addresses; reaching an address the certificate names is not enough.
    func testADNSNameNeedsADNSNameAndAnIPAddressAnIPAddress() async throws {
        for (altName, accepted, refused) in [("IP:127.0.0.1", "127.0.0.1", "localhost"), ("DNS:localhost", "localhost", "127.0.0.1")] {
            let certificates = try await TestCertificates.make(name: "only", subjectAltName: altName)
            defer { certificates.remove() }
            let relay = try await TestRelay.start(redis: relay.redis) {
                $0.tls = ControlTLSFiles(certificatePath: certificates.certificateFile, keyPath: certificates.keyFile)
            }
            func connect(to host: String) async throws -> SIMPClient {
                try await relay.connectClient(user: TestRelay.uniqueUser("alice")) {
                    $0.serverHost = host
                    $0.tls = ClientTLS(caFile: certificates.caFile)
                }
            }
            do {
                _ = try await connect(to: refused)
                XCTFail("\(refused) accepted a certificate for \(altName) only")
            } catch SIMPClientError.cannotConnect(let reason) {
                XCTAssertTrue(
                    reason.contains(
                        "TLS with \(refused):\(relay.port) failed: the relay's certificate is not valid for \(refused) (it names \(altName);"),
                    reason)
            }
            _ = try await connect(to: accepted) // logged in over TLS: the certificate names it
            await relay.stopKeepingRedis()
        }
    }

    func testAClientWithoutTLSIsNotServed() async throws {
        let start = NIODeadline.now()
        do {
            _ = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))
            XCTFail("a plain-TCP client logged in to a TLS relay")
        } catch SIMPClientError.cannotConnect(let reason) {
            XCTAssertTrue(reason.contains("without --tls"), reason)
        }
        XCTAssertLessThan(NIODeadline.now() - start, .seconds(6))
    }

    func testARelayWithAnUnreadableCertificateRefusesToStart() async throws {
        let missing = certificates.directory.appendingPathComponent("missing.pem").path
        var configuration = relay.server.configuration
        configuration.port = 0
        configuration.udpPort = 0
        configuration.relayId += "-broken"
        configuration.tls = ControlTLSFiles(certificatePath: missing, keyPath: certificates.keyFile)
        do {
            let broken = try await BackgroundRelay.start(configuration: configuration)
            await broken.shutdown()
            XCTFail("started without its certificate")
        } catch {
            XCTAssertTrue("\(error)".contains("cannot read the TLS certificate \(missing)"), "\(error)")
        }
    }
}
