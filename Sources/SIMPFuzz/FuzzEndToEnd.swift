import SIMPE2E

/// The end-to-end decoders (docs/E2E.md): what a client decodes from bytes another client or
/// the relay chose. The first byte picks the decoder, the rest is its input.
extension FuzzEntry {
    /// Which decoder an end-to-end input goes to (its first byte, modulo the count).
    public enum EndToEndDecoder: UInt8, CaseIterable, Sendable {
        /// A direct message's envelope (field 60), and each copy in it as a pairwise payload.
        case envelope
        /// A key bundle (KEYS_FETCH answer's `keyBundles`), and its signature check.
        case keyBundle
        /// A one-time prekey (KEYS_FETCH answer's `oneTimePrekeys`).
        case oneTimePrekey
        /// A pairwise payload on its own (ratchet or prekey message).
        case pairwise
        /// A resend request (the plaintext of a pairwise message, E2E.md §7.5).
        case resendRequest
    }

    /// Untrusted end-to-end bytes: decoding throws or succeeds, never crashes; what decodes
    /// encodes back to the same bytes (each format has one encoding).
    public static func endToEnd(_ bytes: UnsafeRawBufferPointer) throws {
        guard let first = bytes.first else { return }
        let input = Array(bytes.dropFirst())
        let count = UInt8(EndToEndDecoder.allCases.count)
        switch EndToEndDecoder(rawValue: first % count)! {
        case .envelope:
            guard let envelope = try? E2EEnvelope(encoded: input) else { return }
            try roundTrips(envelope.encoded, input, "envelope")
            for copy in envelope.copies { _ = try? PairwiseMessage(encoded: copy.payload) }
        case .keyBundle:
            guard let bundle = try? KeyBundle(encoded: input) else { return }
            try roundTrips(bundle.encoded, input, "key bundle")
            _ = try? bundle.verify()
        case .oneTimePrekey:
            guard let prekey = try? OneTimePrekey(encoded: input) else { return }
            try roundTrips(prekey.encoded, input, "one-time prekey")
        case .pairwise:
            _ = try? PairwiseMessage(encoded: input)
        case .resendRequest:
            guard let request = try? ResendRequest(encoded: input) else { return }
            try roundTrips(request.encoded, input, "resend request")
        }
    }

    private static func roundTrips(_ encoded: [UInt8], _ input: [UInt8], _ what: String) throws {
        guard encoded == input else { throw FuzzViolation("\(what) decoded from \(input) encodes as \(encoded)") }
    }
}
