import NIOCore
import SIMPCore

/// The properties the fuzz targets check on every input.
enum FuzzChecks {
    /// `DatagramHeader.parse` gives up or agrees with the full decoder: when it reads a
    /// header, the decoder accepts the bytes and finds the same routing fields.
    static func headerAgrees(_ header: DatagramHeader?, with decoded: Result<SIMPMessage, Error>) throws {
        guard let header else { return }
        switch decoded {
        case .failure(let error):
            throw FuzzViolation("DatagramHeader.parse read \(header) but MessageCodec.decode failed: \(error)")
        case .success(let message):
            guard DatagramHeader(message) == header else {
                throw FuzzViolation("DatagramHeader.parse read \(header), MessageCodec.decode \(DatagramHeader(message))")
            }
        }
    }

    /// Whatever decodes re-encodes to a message that decodes to the same value.
    static func roundTrips(_ message: SIMPMessage) throws {
        let again: SIMPMessage
        do { again = try MessageCodec.decode(MessageCodec.encode(message)) } catch {
            throw FuzzViolation("re-encoded \(message) does not decode: \(error)")
        }
        guard sameValue(again, message) else {
            throw FuzzViolation("decode(encode(m)) != m:\n\(message)\n\(again)")
        }
    }

    /// Every message the relay would send on a control connection survives the wire.
    static func sendsAreEncodable(_ actions: [RelayCore.Action]) throws {
        for case .send(_, let message) in actions { try roundTrips(message) }
    }

    /// Equality that treats NaN image scales as equal (protobuf-c copies the float's bits).
    private static func sameValue(_ a: SIMPMessage, _ b: SIMPMessage) -> Bool {
        var a = a, b = b
        if a.imageScale.isNaN, b.imageScale.isNaN { a.imageScale = 0; b.imageScale = 0 }
        return a == b
    }
}
