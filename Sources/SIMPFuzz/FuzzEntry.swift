import NIOCore
import SIMPCore

/// A property a fuzz target checks did not hold for an input: the input is a finding.
public struct FuzzViolation: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The per-input functions of the fuzz targets (`scripts/fuzz`). libFuzzer calls them through
/// the executables in `fuzz/`; the regression tests call them on the committed inputs.
///
/// Each runs everything the relay does with untrusted bytes and checks the properties in
/// `FuzzChecks`; a crash or a thrown `FuzzViolation` is a finding.
public enum FuzzEntry {
    /// An untrusted UDP datagram. The bytes go to the relay twice: as they came (the seal
    /// check must refuse them) and as the payload of a datagram sealed by a logged-in user
    /// (a hostile client), which reaches everything behind the seal.
    ///
    /// Mirrors the relay's datagram path up to routing: seal check, fast header parse, full
    /// decode where needed, then `RelayCore.routeDatagram` on a relay with local and remote users.
    public static func datagram(_ bytes: UnsafeRawBufferPointer) throws {
        let payload = ByteBuffer(bytes: bytes)
        let header = DatagramHeader.parse(payload)
        let decoded = Result { try MessageCodec.decode(payload) }
        try FuzzChecks.headerAgrees(header, with: decoded)
        if case .success(let message) = decoded {
            try FuzzChecks.roundTrips(message)
            try FuzzChecks.receiptIsHandled(message)
        }
        var relay = FuzzRelay.standard
        // Bytes that were not sealed by a session must never be delivered.
        try relay.receive(datagram: payload, decoded: .failure(FuzzViolation("forged datagram delivered")))
        try relay.receive(datagram: relay.sealedByAlice(payload), decoded: decoded)
    }

    /// An untrusted TCP control stream. The first byte chooses where the stream is cut into
    /// reads; the rest is the stream.
    ///
    /// Mirrors the relay's control path: `FrameDecoder`, then `MessageCodec.decode` of each
    /// payload, then `RelayCore.controlReceived` (or `malformedControl`) on one connection of a
    /// relay with other users connected. The frames must not depend on how the stream was cut.
    public static func control(_ bytes: UnsafeRawBufferPointer) throws {
        guard let cut = bytes.first else { return }
        let stream = ByteBuffer(bytes: UnsafeRawBufferPointer(rebasing: bytes.dropFirst()))
        let whole = ControlStream.split(stream, readSizes: [stream.readableBytes])
        let cutUp = ControlStream.split(stream, readSizes: ControlStream.readSizes(seed: cut, total: stream.readableBytes))
        guard whole == cutUp else {
            throw FuzzViolation("frames depend on how the stream was cut: \(whole) vs \(cutUp)")
        }
        var relay = FuzzRelay.standard
        try relay.receive(control: whole, registrationSucceeds: cut & 0x80 == 0)
    }
}
