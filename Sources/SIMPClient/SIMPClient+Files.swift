import SIMPCore

/// The datagrams of file transfers (docs/PROTOCOL.md §5.6), for `FileSend` and `FileDownloads`.
extension SIMPClient {
    /// FILE_CHUNK and FILE_ACK datagrams that arrived (one consumer; the newest 16,384 are
    /// buffered, older ones dropped: a transfer recovers its losses).
    public var fileDatagrams: AsyncStream<SIMPMessage> { fileDatagramStream }

    /// Sends file datagrams as they are, sealed for the relay (nothing is retransmitted: the
    /// transfer does that). Does nothing after `close()` or while not connected.
    public func sendFileDatagrams(_ messages: [SIMPMessage]) async {
        try? await onEngine(now: { engine in engine.sendFileDatagrams(messages) })
    }
}
