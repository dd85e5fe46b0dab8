import Foundation
import NIOCore
import SIMPCore
import SIMPCoreTestKit

/// The attacks of `simp-bench abuse` and of the abuse tests: one user (or many connections)
/// trying to take the relay down, from addresses of 127.0.0.0/8 the attacker alone uses.
public enum AbuseAttack: String, CaseIterable, Codable, Sendable {
    /// KEYS_FETCH of one user's bundles back to back, never reading an answer.
    case keyFetch = "key-fetch flood"
    /// KEYS_PUBLISH with 100 one-time prekeys each, back to back.
    case prekeyPublish = "prekey-publish flood"
    /// ROOM_JOIN of a new room each, back to back.
    case roomJoin = "room-join flood"
    /// 2,000 connections that never log in and 200 that send half a frame, from 40 addresses.
    case idleConnections = "idle + half-frame connections"

    /// A bundle as the relay accepts one (docs/E2E.md §3.1: version 1, 167 bytes, a zero
    /// count, valid keys and signature: the relay checks them at the door).
    public static let bundle: [UInt8] = SignedBundles.published(seed: 7)

    /// One-time prekey `id`: id (u32) ‖ an X25519 public key.
    public static func prekey(_ id: UInt32) -> [UInt8] { SignedBundles.prekey(id) }

    /// A CONNECT of `user` (a relay without login accepts it as it is).
    public static func connect(_ user: String) -> [UInt8] {
        var connect = SIMPMessage(kind: .connect, fromUser: user)
        connect.udpPort = 9
        return AttackSocket.frames([connect])
    }

    /// The flood's frame number `index`, against `victim` (whose keys are fetched).
    public func frame(_ index: Int, victim: String) -> SIMPMessage? {
        switch self {
        case .keyFetch:
            return SIMPMessage(kind: .keysFetch, messageId: UInt64(index + 1), toUser: victim)
        case .prekeyPublish:
            var publish = SIMPMessage(kind: .keysPublish, messageId: UInt64(index + 1))
            publish.keyBundles = [Self.bundle]
            publish.oneTimePrekeys = (0..<RelayCore.maxOneTimePrekeysPerPublish).map { Self.prekey(UInt32(index * 100 + $0)) }
            return publish
        case .roomJoin:
            var join = SIMPMessage(kind: .roomJoin, messageId: UInt64(index + 1))
            join.room = "flood-\(index)"
            return join
        case .idleConnections:
            return nil
        }
    }

    /// Floods from `source` as `user` for `duration`: CONNECT, then frames back to back (up to
    /// 25,000 a second, leaving the machine's cores to the relay now and then), reading
    /// nothing. Returns the frames offered (written into the socket).
    public static func flood(
        _ attack: AbuseAttack, port: Int, from source: String, user: String, victim: String, for duration: Duration
    ) async throws -> Int {
        let attacker = try AttackSocket(port: port, from: source)
        defer { attacker.close() }
        attacker.write(connect(user))
        try await Task.sleep(for: .milliseconds(300))
        let deadline = ContinuousClock.now + duration
        var pending: [UInt8] = [], sent = 0
        while ContinuousClock.now < deadline {
            if pending.isEmpty {
                pending = AttackSocket.frames((0..<50).compactMap { attack.frame(sent + $0, victim: victim) })
                sent += 50
            }
            let written = attacker.write(pending)
            pending.removeFirst(written)
            try? await Task.sleep(for: .milliseconds(pending.isEmpty ? 2 : 5))
        }
        return sent
    }

    /// Opens `idle` connections that send nothing and `halfFrame` that send half a CONNECT, from
    /// 40 addresses (127.0.0.10-49), and returns them open.
    public static func openIdle(_ idle: Int, halfFrame: Int, port: Int) throws -> [AttackSocket] {
        let connect = connect("mallory")
        return try (0..<(idle + halfFrame)).map { index in
            let socket = try AttackSocket(port: port, from: "127.0.0.\(10 + index % 40)")
            if index >= idle { socket.write(Array(connect.prefix(connect.count / 2))) }
            return socket
        }
    }
}
