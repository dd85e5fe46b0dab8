import NIOCore
import SIMPCore
import SIMPNIO

/// What `FrameDecoder` makes of a control stream: the frame payloads, then how it ended.
struct ControlStream: Equatable, CustomStringConvertible {
    var payloads: [ByteBuffer] = []
    /// Set when the peer announced a frame above the limit (the relay then closes).
    var tooLarge: FrameTooLargeError?

    var description: String {
        "\(payloads.map(\.readableBytes)) frame bytes" + (tooLarge.map { ", then \($0)" } ?? "")
    }

    /// Frames `stream` as the relay's pipeline does when TCP delivers it in reads of
    /// `readSizes` bytes (the last read takes whatever is left).
    static func split(_ stream: ByteBuffer, readSizes: [Int]) -> ControlStream {
        let processor = NIOSingleStepByteToMessageProcessor(FrameDecoder(maxFrameSize: Framing.defaultMaxFrameSize))
        var result = ControlStream()
        var rest = stream
        do {
            for size in readSizes where rest.readableBytes > 0 {
                let read = rest.readSlice(length: min(size, rest.readableBytes))!
                try processor.process(buffer: read) { result.payloads.append($0) }
            }
            try processor.finishProcessing(seenEOF: true) { result.payloads.append($0) }
        } catch let error as FrameTooLargeError {
            result.tooLarge = error
        } catch {
            preconditionFailure("FrameDecoder threw \(error)") // it throws nothing else
        }
        return result
    }

    /// Read sizes from 1 to 1 + seed % 32 bytes, covering `total` bytes, from a tiny LCG.
    static func readSizes(seed: UInt8, total: Int) -> [Int] {
        var state = UInt32(seed) &+ 1
        let largest = 1 + UInt32(seed % 32)
        var sizes: [Int] = []
        var covered = 0
        while covered < total {
            state = state &* 1_103_515_245 &+ 12_345
            let size = 1 + Int((state >> 16) % largest)
            sizes.append(size)
            covered += size
        }
        return sizes
    }
}
