import NIOConcurrencyHelpers
import SIMPCore

/// Shares a client's file datagrams (`SIMPClient.fileDatagrams`, which has one consumer)
/// between the transfers of a client that receives files and sends several at once, as
/// `simp chat` does: FILE_CHUNKs (and the relay's FILE_ACKs about files it holds) go to `chunks`
/// (for `FileDownloads`), each FILE_ACK to every
/// transfer that asked for `acknowledgements()` and has not finished (each `FileSend` keeps its
/// own file's).
public final class FileDatagramRouter: Sendable {
    /// The FILE_CHUNKs that arrived, and the relay's FILE_ACKs with `fileHeld`, for
    /// `FileDownloads.run(datagrams:)`.
    public let chunks: AsyncStream<SIMPMessage>
    private let chunksContinuation: AsyncStream<SIMPMessage>.Continuation
    private let listeners = NIOLockedValueBox<(next: Int, all: [Int: AsyncStream<SIMPMessage>.Continuation])>((0, [:]))
    private let reader = NIOLockedValueBox<Task<Void, Never>?>(nil)

    /// Starts reading `client`'s file datagrams until it closes (or `stop()`).
    public init(client: SIMPClient) {
        (chunks, chunksContinuation) = AsyncStream.makeStream(of: SIMPMessage.self, bufferingPolicy: .bufferingNewest(16_384))
        let task = Task { [chunksContinuation, listeners] in
            for await message in client.fileDatagrams {
                if message.kind == .fileChunk {
                    chunksContinuation.yield(message)
                } else {
                    // The relay's FILE_ACKs about files it holds answer downloads too (FILE_NOT_HELD).
                    if message.fileHeld { chunksContinuation.yield(message) }
                    for listener in listeners.withLockedValue({ Array($0.all.values) }) { listener.yield(message) }
                }
            }
            chunksContinuation.finish()
            for listener in listeners.withLockedValue({ Array($0.all.values) }) { listener.finish() }
        }
        reader.withLockedValue { $0 = task }
    }

    /// The acknowledgements that arrive from now on, until the stream is dropped (its iteration
    /// ends: the transfer finished).
    public func acknowledgements() -> AsyncStream<SIMPMessage> {
        let (stream, continuation) = AsyncStream.makeStream(of: SIMPMessage.self, bufferingPolicy: .bufferingNewest(4096))
        let id = listeners.withLockedValue { state in
            defer { state.next += 1 }
            state.all[state.next] = continuation
            return state.next
        }
        continuation.onTermination = { [listeners] _ in _ = listeners.withLockedValue { $0.all.removeValue(forKey: id) } }
        return stream
    }

    /// Stops reading.
    public func stop() {
        reader.withLockedValue { $0?.cancel() }
    }
}
