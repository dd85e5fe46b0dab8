import Crypto
import CryptoExtras

/// What a relay stores for one user (docs/PROTOCOL.md §3.2): enough to check a login proof and
/// sign the answer, never the password or anything that logs in by itself (SCRAM's
/// StoredKey/ServerKey, RFC 5802 §3).
public struct PasswordVerifier: Sendable, Equatable {
    public var salt: [UInt8]
    public var iterations: UInt32
    /// SHA-256 of the client key.
    public var storedKey: [UInt8]
    /// Signs the relay's answer, proving to the client that the relay knows the verifier.
    public var serverKey: [UInt8]

    public init(salt: [UInt8], iterations: UInt32, storedKey: [UInt8], serverKey: [UInt8]) {
        self.salt = salt
        self.iterations = iterations
        self.storedKey = storedKey
        self.serverKey = serverKey
    }

    /// The fewest PBKDF2 iterations a verifier may use.
    public static let minimumIterations: UInt32 = 4096
    /// Iterations for new passwords unless the operator chooses otherwise.
    public static let defaultIterations: UInt32 = 100_000

    /// A verifier for `password` with a new random salt.
    public static func make(password: String, iterations: UInt32 = defaultIterations) -> PasswordVerifier {
        let salt = LoginCrypto.randomBytes(16)
        let keys = LoginCrypto.passwordKeys(password: password, salt: salt, iterations: iterations)
        return PasswordVerifier(
            salt: salt, iterations: iterations, storedKey: LoginCrypto.sha256(keys.clientKey), serverKey: keys.serverKey)
    }
}

/// The values both sides of one login compute from (docs/PROTOCOL.md §3.1).
public struct LoginTranscript: Sendable, Equatable {
    public var user: String
    public var clientNonce: [UInt8]
    public var relayNonce: [UInt8]
    public var salt: [UInt8]
    public var iterations: UInt32

    public init(user: String, clientNonce: [UInt8], relayNonce: [UInt8], salt: [UInt8], iterations: UInt32) {
        self.user = user
        self.clientNonce = clientNonce
        self.relayNonce = relayNonce
        self.salt = salt
        self.iterations = iterations
    }

    /// The signed message: each part length-prefixed (4 bytes, big-endian), in this order.
    var authMessage: [UInt8] {
        var out = Array("simp-login-v1".utf8)
        for part in [Array(user.utf8), clientNonce, relayNonce, salt] {
            out += LoginCrypto.bigEndian(UInt32(part.count)) + part
        }
        return out + LoginCrypto.bigEndian(iterations)
    }

    /// The session secret both sides derive from the client key once the login succeeded.
    func sessionSecret(clientKey: [UInt8]) -> [UInt8] {
        let key = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: clientKey), salt: clientNonce + relayNonce,
            info: Array("simp v1 session".utf8), outputByteCount: 32)
        return key.withUnsafeBytes { Array($0) }
    }
}

/// The client's side of a login: the proof for a challenge, and the check of the relay's
/// signature. Keys derived from the password are cached per salt, so reconnecting does not
/// repeat PBKDF2.
public struct LoginClient: Sendable {
    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        /// The relay authenticates but no password was given.
        case passwordRequired
        /// The relay's signature is wrong: it does not hold this user's verifier.
        case relayNotAuthentic
        case malformedChallenge

        public var description: String {
            switch self {
            case .passwordRequired: return "the relay requires a password (give --password-file or set SIMP_PASSWORD)"
            case .relayNotAuthentic: return "the relay could not prove it knows this user: not the relay you meant?"
            case .malformedChallenge: return "the relay sent a malformed login challenge"
            }
        }
    }

    public let user: String
    private let password: String?
    private var cachedKeys: (salt: [UInt8], iterations: UInt32, keys: LoginCrypto.PasswordKeys)?

    public init(user: String, password: String?) {
        self.user = user
        self.password = password
    }

    /// An AUTH frame with a fresh nonce; returns the nonce to keep for the challenge.
    public func start() -> (frame: SIMPMessage, clientNonce: [UInt8]) {
        var auth = SIMPMessage(kind: .auth, fromUser: user)
        auth.nonce = LoginCrypto.randomBytes(24)
        return (auth, auth.nonce)
    }

    /// The CONNECT answering `challenge`, and the transcript to check CONNECTED with.
    public mutating func answer(
        _ challenge: SIMPMessage, clientNonce: [UInt8], udpPort: Int
    ) throws(Failure) -> (frame: SIMPMessage, transcript: LoginTranscript?) {
        var connect = SIMPMessage(kind: .connect, fromUser: user)
        connect.udpPort = UInt32(udpPort)
        connect.acceptsBatchReceipts = true // this library's senders settle every id of a batch (§6.1)
        guard challenge.iterations > 0 else { return (connect, nil) } // development relay
        guard let password else { throw .passwordRequired }
        guard (16...64).contains(challenge.nonce.count), !challenge.salt.isEmpty,
            challenge.iterations >= PasswordVerifier.minimumIterations
        else { throw .malformedChallenge }
        let transcript = LoginTranscript(
            user: user, clientNonce: clientNonce, relayNonce: challenge.nonce, salt: challenge.salt,
            iterations: challenge.iterations)
        let keys = passwordKeys(password, salt: challenge.salt, iterations: challenge.iterations)
        let signature = LoginCrypto.hmac(key: LoginCrypto.sha256(keys.clientKey), transcript.authMessage)
        connect.proof = zip(keys.clientKey, signature).map { $0 ^ $1 }
        return (connect, transcript)
    }

    /// Checks CONNECTED and returns the session's keys.
    public func accept(_ connected: SIMPMessage, transcript: LoginTranscript?) throws(Failure) -> SessionKeys {
        guard let transcript, let keys = cachedKeys?.keys else {
            return SessionKeys(sessionId: connected.sessionId, secret: connected.sessionSecret)
        }
        let expected = LoginCrypto.hmac(key: keys.serverKey, transcript.authMessage)
        guard LoginCrypto.constantTimeEqual(expected, connected.proof) else { throw .relayNotAuthentic }
        return SessionKeys(sessionId: connected.sessionId, secret: transcript.sessionSecret(clientKey: keys.clientKey))
    }

    private mutating func passwordKeys(_ password: String, salt: [UInt8], iterations: UInt32) -> LoginCrypto.PasswordKeys {
        if let cached = cachedKeys, cached.salt == salt, cached.iterations == iterations { return cached.keys }
        let keys = LoginCrypto.passwordKeys(password: password, salt: salt, iterations: iterations)
        cachedKeys = (salt, iterations, keys)
        return keys
    }
}

/// The relay's side of a login.
public enum LoginVerification {
    /// Checks `proof` against `verifier`. On success: the relay's signature (for CONNECTED)
    /// and the session secret; nil when the proof is wrong.
    public static func verify(
        proof: [UInt8], transcript: LoginTranscript, verifier: PasswordVerifier
    ) -> (signature: [UInt8], sessionSecret: [UInt8])? {
        let authMessage = transcript.authMessage
        let clientSignature = LoginCrypto.hmac(key: verifier.storedKey, authMessage)
        guard proof.count == clientSignature.count else { return nil }
        let clientKey = zip(proof, clientSignature).map { $0 ^ $1 }
        guard LoginCrypto.constantTimeEqual(LoginCrypto.sha256(clientKey), verifier.storedKey) else { return nil }
        return (LoginCrypto.hmac(key: verifier.serverKey, authMessage), transcript.sessionSecret(clientKey: clientKey))
    }

    /// A verifier for a user that does not exist: a salt derived from `secret` and the user
    /// name (stable, so repeated challenges look like a real user's) and keys no proof matches.
    public static func decoy(for user: String, secret: [UInt8], iterations: UInt32) -> PasswordVerifier {
        let salt = Array(LoginCrypto.hmac(key: secret, Array("decoy salt \(user)".utf8)).prefix(16))
        let unmatchable = LoginCrypto.hmac(key: secret, Array("decoy key \(user)".utf8))
        return PasswordVerifier(salt: salt, iterations: iterations, storedKey: unmatchable, serverKey: unmatchable)
    }

    /// The PBKDF2 iteration count of `user`'s decoy, drawn from `counts` (how many real users
    /// use each count) by a number derived from `secret` and the name: stable for one name,
    /// and over many names distributed as real users' counts are. No users: the default count.
    public static func decoyIterations(for user: String, secret: [UInt8], counts: [UInt32: Int]) -> UInt32 {
        let weighted = counts.filter { $0.value > 0 }.sorted { $0.key < $1.key }
        let total = weighted.reduce(UInt64(0)) { $0 + UInt64($1.value) }
        guard total > 0 else { return PasswordVerifier.defaultIterations }
        let draw =
            LoginCrypto.hmac(key: secret, Array("decoy iterations \(user)".utf8)).prefix(8)
            .reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % total
        var below = UInt64(0)
        for (iterations, users) in weighted {
            below += UInt64(users)
            if draw < below { return iterations }
        }
        return weighted[weighted.count - 1].key
    }
}

/// The primitives of the login, on swift-crypto.
public enum LoginCrypto {
    struct PasswordKeys: Sendable {
        var clientKey: [UInt8]
        var serverKey: [UInt8]
    }

    /// Cryptographically random bytes.
    public static func randomBytes(_ count: Int) -> [UInt8] {
        SymmetricKey(size: SymmetricKeySize(bitCount: count * 8)).withUnsafeBytes { Array($0) }
    }

    static func passwordKeys(password: String, salt: [UInt8], iterations: UInt32) -> PasswordKeys {
        // PBKDF2 only fails for invalid parameters; the iterations are checked by the callers.
        let salted = try! KDF.Insecure.PBKDF2.deriveKey(
            from: Array(password.utf8), salt: salt, using: .sha256, outputByteCount: 32,
            unsafeUncheckedRounds: Int(iterations))
        let saltedBytes = salted.withUnsafeBytes { Array($0) }
        return PasswordKeys(
            clientKey: hmac(key: saltedBytes, Array("Client Key".utf8)),
            serverKey: hmac(key: saltedBytes, Array("Server Key".utf8)))
    }

    static func hmac(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
    }

    static func sha256(_ bytes: [UInt8]) -> [UInt8] { Array(SHA256.hash(data: bytes)) }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        withUnsafeBytes(of: value.bigEndian) { Array($0) }
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
