import Foundation
import SIMPLocalServers
import SIMPTestSupport
import XCTest

/// Access tokens with real processes on loopback (docs/PROTOCOL.md §4.9): a `simp-server` child
/// started with `--jwks` (keys made by `simp-server token keygen`, tokens by `token issue`) and
/// `simp` children logging in with `SIMP_TOKEN` or `--token-command`; the relay's Redis is the
/// test relay's.
final class AccessTokenStoryTests: StoryProcessTestCase {
    var keys: URL!
    var port = 0
    var server: ChildProcess!
    /// Names of their own: the test relay's Redis is shared, and an earlier test's alice may have
    /// left a device list signed by a user key these processes do not hold (docs/E2E.md §3.4).
    let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")

    override func setUp() async throws {
        try await super.setUp()
        keys = FileManager.default.temporaryDirectory.appendingPathComponent("simp-keys-\(UUID().uuidString)")
        _ = try await tool(["token", "keygen", "--out", keys.path, "--kid", "k1"])
    }

    override func tearDown() async throws {
        try? FileManager.default.removeItem(at: keys)
        try await super.tearDown()
    }

    /// Runs `simp-server` with `arguments` to its end and returns what it printed.
    func tool(_ arguments: [String]) async throws -> String {
        let run = try ChildProcess("simp-server", arguments)
        let status = await run.exitStatus()
        XCTAssertEqual(status, 0, run.standardError)
        return run.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A token for `user` signed with key `kid`, valid for `ttl` ("1h", "6s").
    func token(_ user: String, kid: String = "k1", ttl: String = "1h", _ more: [String] = []) async throws -> String {
        try await tool(["token", "issue", user, "--key", keys.appendingPathComponent("\(kid).private.jwk").path, "--ttl", ttl] + more)
    }

    func startTokenRelay() async throws {
        port = try FreePort.tcp()
        server = try await startServer([
            "--port", String(port), "--udp-port", String(try FreePort.udp()), "--redis", relay.redis.url.description,
            "--relay-id", "jwt-\(UInt32.random(in: .min ... .max))", "--jwks", keys.appendingPathComponent("jwks.json").path,
            "--token-audience", "simp", "--token-leeway", "0",
        ])
    }

    /// `simp send` as `user` with `environment` (its token), to its end: the exit status and
    /// what it printed on standard error.
    func send(as user: String, to peer: String, _ text: String, environment: [String: String]) async throws -> (Int32?, String) {
        let run = try ChildProcess(
            "simp", ["send", "--server", "127.0.0.1:\(port)", "--user", user, "--to", peer, text],
            environment: environment.merging(["SIMP_HOME": home.path]) { $1 })
        return (await run.exitStatus(), run.standardError)
    }

    func testAValidTokenLogsBobInAndEachBadOneIsRefusedWithItsOwnMessageAndNeverLogged() async throws {
        try await startTokenRelay()
        let aliceListen = try await startListening(alice, server: "127.0.0.1:\(port)")
        let valid = try await token(bob)
        let (status, said) = try await send(as: bob, to: alice, "hello with a token", environment: ["SIMP_TOKEN": valid])
        XCTAssertEqual(status, 0, said)
        let arrived = await Eventually.holds(within: .seconds(10)) {
            aliceListen.standardOutput.contains("\(self.bob) (") && aliceListen.standardOutput.contains("): hello with a token")
        }
        XCTAssertTrue(arrived, aliceListen.standardOutput + aliceListen.standardError)

        _ = try await tool(["token", "keygen", "--out", keys.appendingPathComponent("other").path, "--kid", "k1"])
        let strangerKey = keys.appendingPathComponent("other/k1.private.jwk").path
        let refused: [(String, String, String)] = [
            ("expired", try await token(bob, ttl: "1h", ["--backdate", "2h"]), "access token expired 60 min ago: get a new one"),
            ("wrong key", try await tool(["token", "issue", bob, "--key", strangerKey]), "access token refused: its signature is wrong"),
            ("wrong audience", try await token(bob, ttl: "1h", ["--audience", "billing"]), "wrong audience"),
            ("bob's token as alice", valid, "access token refused: it is for another user than \(alice)"),
        ]
        var seen: Set<String> = []
        for (what, token, expected) in refused {
            let user = what == "bob's token as alice" ? alice : bob
            let (status, said) = try await send(as: user, to: "carol", "never sent", environment: ["SIMP_TOKEN": token])
            XCTAssertEqual(status, 1, "\(what): \(said)")
            XCTAssertTrue(said.contains(expected), "\(what): \(said)")
            seen.insert(said.components(separatedBy: "relay refused: ").last ?? said)
        }
        XCTAssertEqual(seen.count, refused.count, "each refusal says its own reason")
        let log = server.standardError
        XCTAssertTrue(log.contains("token_refused"), log)
        for (what, token, _) in refused + [("valid", valid, "")] {
            XCTAssertFalse(log.contains(token), "\(what): the token is in the relay's log")
            XCTAssertFalse(log.contains(String(token.split(separator: ".").last ?? "")), "\(what): its signature is in the relay's log")
        }
    }

    /// The fields of `user`'s registration in Redis (`simp:user:{user}`).
    func registration(of user: String) async throws -> [String] {
        let text = try await ToolProcess.run(
            "redis-cli", ["-u", relay.redis.url.description, "HGETALL", "simp:user:{\(user)}"], in: FileManager.default.temporaryDirectory)
        return text.split(separator: "\n").map(String.init)
    }

    func testARefreshThroughTokenCommandKeepsTheConnectionAndTheUDPRegistration() async throws {
        try await startTokenRelay()
        let issuer = try ChildProcess.locate("simp-server").path
        let command = "\(issuer) token issue \(bob) --key \(keys.appendingPathComponent("k1.private.jwk").path) --ttl 6s"
        let listen = try ChildProcess(
            "simp",
            ["listen", "--server", "127.0.0.1:\(port)", "--user", bob, "--device", "phone", "--log-level", "info", "--token-command", command],
            environment: ["SIMP_HOME": home.path])
        children.append(listen)
        let listening = await Eventually.holds(within: .seconds(15)) { listen.standardError.contains("listening as") }
        XCTAssertTrue(listening, listen.standardError)
        let before = try await registration(of: bob)
        // The first token runs out within 6 s: two renewals come before the wait is over.
        try await Task.sleep(for: .seconds(13))
        let after = try await registration(of: bob)
        XCTAssertTrue(before.contains("d:phone") && before.contains { $0.hasPrefix("s:") }, "\(before)")
        XCTAssertEqual(after, before, "the same session token (relay/connection number), UDP address and since")
        XCTAssertGreaterThanOrEqual(
            listen.standardError.components(separatedBy: "access token renewed on the same connection").count - 1, 2, listen.standardError)
        XCTAssertFalse(listen.standardError.contains("reconnecting"), listen.standardError)
        XCTAssertEqual(server.standardError.components(separatedBy: "user=\(bob) [SIMPRelay] user connected").count - 1, 1, server.standardError)
        XCTAssertFalse(server.standardError.contains("token_session_expired"), server.standardError)
        let valid = try await token(alice)
        let (status, said) = try await send(as: alice, to: bob, "after the first token's exp", environment: ["SIMP_TOKEN": valid])
        XCTAssertEqual(status, 0, said)
        let arrived = await Eventually.holds(within: .seconds(10)) { listen.standardOutput.contains("): after the first token's exp") }
        XCTAssertTrue(arrived, listen.standardOutput + listen.standardError)
    }

    func testWithoutARefreshTheSessionEndsAtExpWithAClearReason() async throws {
        try await startTokenRelay()
        let short = try await token(bob, ttl: "4s")
        let listen = try ChildProcess(
            "simp", ["listen", "--server", "127.0.0.1:\(port)", "--user", bob, "--device", "phone"],
            environment: ["SIMP_HOME": home.path, "SIMP_TOKEN": short])
        children.append(listen)
        let status = await listen.exitStatus(timeout: 20)
        XCTAssertEqual(status, 1, listen.standardError)
        XCTAssertTrue(listen.standardError.contains("SIMP_TOKEN cannot be renewed"), listen.standardError)
        XCTAssertTrue(
            listen.standardError.contains(
                "the relay ended the session: your access token expired 0 s ago and no new one came: the session ended; log in again with a new token. Not reconnecting: get a new token"
            ),
            listen.standardError)
        XCTAssertTrue(server.standardError.contains("token_session_expired"), server.standardError)
    }

    func testDenyTokensRevokesTokensIssuedBeforeItsTime() async throws {
        try await startTokenRelay()
        _ = try await startListening(alice, server: "127.0.0.1:\(port)")
        let old = try await token(bob)
        try await Task.sleep(for: .seconds(1.1)) // tokens carry whole seconds
        let run = try ChildProcess("simp-server", ["user", "deny-tokens", bob, "--before", "now", "--redis", relay.redis.url.description])
        _ = await run.exitStatus()
        XCTAssertTrue(run.standardOutput.contains("access tokens of \(bob) issued before"), run.standardOutput + run.standardError)
        let (refused, said) = try await send(as: bob, to: alice, "revoked", environment: ["SIMP_TOKEN": old])
        XCTAssertEqual(refused, 1, said)
        XCTAssertTrue(said.contains("the relay's operator revoked tokens issued before it; get a new one"), said)
        try await Task.sleep(for: .seconds(1.1)) // a token of the deny's own second counts as before it
        let (accepted, saidAgain) = try await send(as: bob, to: alice, "new token", environment: ["SIMP_TOKEN": try await token(bob)])
        XCTAssertEqual(accepted, 0, saidAgain)
    }

    func testRotatingTheKeySetTakesEffectWithoutARestart() async throws {
        try await startTokenRelay()
        _ = try await startListening(alice, server: "127.0.0.1:\(port)")
        let jwks = keys.appendingPathComponent("jwks.json")
        let oldSet = try Data(contentsOf: jwks)
        _ = try await tool(["token", "keygen", "--out", keys.path, "--kid", "k2", "--algorithm", "ES256"]) // k1 and k2
        let reloaded = await Eventually.holds(within: .seconds(10)) { self.server.standardError.contains("keys=k1,k2") }
        XCTAssertTrue(reloaded, server.standardError)
        let (newKey, said) = try await send(as: bob, to: alice, "k2", environment: ["SIMP_TOKEN": try await token(bob, kid: "k2")])
        XCTAssertEqual(newKey, 0, said)

        let both = try JSONSerialization.jsonObject(with: try Data(contentsOf: jwks)) as! [String: [[String: String]]]
        let onlyNew = try JSONSerialization.data(withJSONObject: ["keys": both["keys"]!.filter { $0["kid"] == "k2" }])
        try onlyNew.write(to: jwks, options: .atomic)
        let removed = await Eventually.holds(within: .seconds(10)) { self.server.standardError.contains("keys=k2 why") }
        XCTAssertTrue(removed, server.standardError)
        let (oldKey, refusal) = try await send(as: bob, to: alice, "k1", environment: ["SIMP_TOKEN": try await token(bob, kid: "k1")])
        XCTAssertEqual(oldKey, 1, refusal)
        XCTAssertTrue(refusal.contains("access token refused: signed with a key this relay does not know"), refusal)
        XCTAssertNotEqual(oldSet, onlyNew)
        server.signal(SIGHUP) // reads the file again, and does not end the relay
        let hungUp = await Eventually.holds(within: .seconds(10)) { self.server.standardError.contains("why=SIGHUP") }
        XCTAssertTrue(hungUp, server.standardError)
    }
}
