import SIMPCore
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
        /// A user's signed device list (KEYS_PUBLISH field 120, served back by KEYS_FETCH,
        /// E2E.md §3.4): its signature check, the relay's check and the sender's pin decision.
        case deviceList
        /// A room admit (the plaintext of a pairwise message, E2E.md §8.4).
        case roomAdmit
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
        case .deviceList:
            try deviceList(input)
        case .roomAdmit:
            guard let admit = try? RoomAdmit(encoded: input) else { return }
            try roundTrips(admit.encoded, input, "room admit")
            guard RoomAdmit.isAdmit(input) else { throw FuzzViolation("room admit \(input) is not recognised as an admit") }
        }
    }

    /// A served device list: the relay keeps (`deviceListProblem` nil) exactly what decodes for
    /// its user; what decodes is pinned on first sight and changes nothing when served again;
    /// what does not decode is never pinned.
    private static func deviceList(_ input: [UInt8]) throws {
        guard let list = try? SignedDeviceList(encoded: input) else {
            guard input.isEmpty || RelayCore.deviceListProblem(input, of: "alice") != nil else {
                throw FuzzViolation("the relay keeps a device list that does not decode: \(input)")
            }
            if case .pinned = DeviceListPin.evaluate(served: input, for: "alice", pinned: nil) {
                throw FuzzViolation("a device list that does not decode was pinned: \(input)")
            }
            return
        }
        try roundTrips(list.encoded, input, "device list")
        guard list.devices.count <= SignedDeviceList.maxDevices,
            zip(list.devices, list.devices.dropFirst()).allSatisfy({ Array($0.device.utf8).lexicographicallyPrecedes(Array($1.device.utf8)) })
        else { throw FuzzViolation("device list \(input) decoded with devices unsorted, repeated or too many") }
        if let problem = RelayCore.deviceListProblem(input, of: list.user) {
            throw FuzzViolation("the relay refuses a device list that decodes: \(problem)")
        }
        guard DeviceListPin.evaluate(served: input, for: list.user, pinned: nil) == .pinned(list),
            DeviceListPin.evaluate(served: input, for: list.user, pinned: list) == .unchanged
        else { throw FuzzViolation("device list \(input) is not pinned once, then unchanged") }
    }

    private static func roundTrips(_ encoded: [UInt8], _ input: [UInt8], _ what: String) throws {
        guard encoded == input else { throw FuzzViolation("\(what) decoded from \(input) encodes as \(encoded)") }
    }
}
