import Foundation
import NIOCore
import SIMPClient
import SIMPCore

/// A file transfer's client-side work per chunk for `scripts/bench-guard`: the sender's and
/// the receiver's own code (`FileSender` and `FileChunkSource`, `FileReceiver` and `PartFile`)
/// with real files under `directory`, and the datagram seals and opens a client does. The clock
/// is virtual (100 µs per step), keys and file bytes are fixed, and the acknowledgements come
/// from a receiver of the same chunks, so a run repeats exactly. Actor hops, streams and the
/// socket writes are not counted; the relay's part is `relay.file-chunk`.
///
/// Phases (each `chunks` counted after `warmup` uncounted):
/// - `client.file-chunk-send`: the sender's core asks for the next chunk (polls that find
///   nothing to send count too), which is read from the file's window, sealed with the file's
///   key, made a FILE_CHUNK and sealed as a datagram; the FILE_ACKs that come back (about one
///   per 8 chunks) are opened and taken by the sender's core;
/// - `client.file-chunk-receive`: each of those datagrams opened, decoded, the chunk opened
///   with the file's key and written into the part file, and a FILE_ACK sealed when one is due.
public enum FileChunkInstructionWorkload {
    public static func run(chunks: Int, warmup: Int = 20, directory: URL, marks: InstructionMarks) throws -> [InstructionPhase] {
        var run = try Run(chunkCount: UInt64(chunks + warmup), directory: directory, marks: marks)
        marks.startInstrumentation()
        var phases: [InstructionPhase] = []
        phases.append(try marks.phase("client.file-chunk-send", count: chunks, warmup: warmup, on: &run) { try $0.sendChunk(counted: $1) })
        phases.append(try marks.phase("client.file-chunk-receive", count: chunks, warmup: warmup, on: &run) { try $0.receiveChunk(counted: $1) })
        return phases
    }

    struct Run {
        let marks: InstructionMarks
        var now = NIODeadline.uptimeNanoseconds(1_000_000_000)
        let offer: FileReceiver.Offer
        var sender: FileSender
        var source: FileChunkSource
        /// What the sender was told to send and has not sent yet.
        var pending: [FileSender.Transmission] = []
        var nextPending = 0
        /// The receiver whose acknowledgements drive the sender (not counted).
        var peer: FileReceiver
        /// The chunks' datagrams as the sender sealed them, for the receive phase.
        var datagrams: [ByteBuffer] = []
        var nextDatagram = 0
        /// The receiver counted in the receive phase, and its part file.
        var receiver: FileReceiver
        let part: FileHandle
        /// One session's keys both ways (the relay's re-seal between them is `relay.file-chunk`'s).
        var chunkSealer: DatagramSealer
        var chunkOpener: DatagramOpener
        var ackSealer: DatagramSealer
        var ackOpener: DatagramOpener

        init(chunkCount: UInt64, directory: URL, marks: InstructionMarks) throws {
            self.marks = marks
            let folder = directory.appendingPathComponent("file-chunks")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let size = chunkCount * UInt64(FileSend.chunkSize)
            // AES-GCM's cost does not depend on the bytes: one value, made quickly (valgrind runs the setup too).
            let bytes = [UInt8](repeating: 0x5a, count: Int(size))
            let path = folder.appendingPathComponent("sent")
            try Data(bytes).write(to: path)
            let partPath = folder.appendingPathComponent("received.part")
            _ = FileManager.default.createFile(atPath: partPath.path, contents: nil)
            guard let file = FileHandle(forReadingAtPath: path.path), let part = FileHandle(forUpdatingAtPath: partPath.path) else {
                throw WorkloadError("cannot open the workload's files in \(folder.path)")
            }
            self.part = part
            let key = (0..<FileChunkCipher.keySize).map { UInt8($0) }
            let fileId: UInt64 = 0x5349_4d50
            offer = FileReceiver.Offer(
                fileId: fileId, sender: "alice", name: "sent", size: size, chunkSize: FileSend.chunkSize, key: key, digest: FileDigest.of(bytes))
            sender = FileSender(fileId: fileId, chunkCount: chunkCount, now: now)
            source = FileChunkSource(file: file, size: size, fileId: fileId, cipher: FileChunkCipher(key: key, fileId: fileId), peer: "bob")
            peer = FileReceiver(offer: offer, device: "phone", instance: 1)
            receiver = FileReceiver(offer: offer, device: "phone", instance: 1)
            let keys = SessionKeys(sessionId: 42, secret: (0..<32).map { UInt8($0 &* 7) })
            chunkSealer = DatagramSealer(keys: keys, direction: .uplink)
            chunkOpener = DatagramOpener(keys: keys, direction: .uplink)
            ackSealer = DatagramSealer(keys: keys, direction: .downlink)
            ackOpener = DatagramOpener(keys: keys, direction: .downlink)
        }

        /// One chunk sent (polling the sender's core until it has one), and the acknowledgement
        /// it brings, if any, taken.
        mutating func sendChunk(counted: Bool) throws {
            var polls = 0
            while nextPending == pending.count {
                polls += 1
                guard polls < 10_000 else { throw WorkloadError("the sender sent nothing for 1 s of virtual time") }
                now = now + .microseconds(100)
                pending = marks.measure(if: counted) { sender.poll(now: now) }
                nextPending = 0
            }
            let transmission = pending[nextPending]
            nextPending += 1
            let message = try marks.measure(if: counted) {
                var message = try source.message(for: transmission, upload: false)
                message.fromUser = "alice" // as the client's session does
                datagrams.append(chunkSealer.seal(message))
                return message
            }
            _ = peer.chunkArrived(message, now: now)
            guard let ack = peer.pollAck(from: "bob", now: now) else { return }
            let sealedAck = ackSealer.seal(ack)
            try marks.measure(if: counted) {
                let opened = try MessageCodec.decode(try ackOpener.open(sealedAck).payload)
                guard sender.acknowledgement(opened, now: now) else { throw WorkloadError("the sender refused \(opened)") }
            }
        }

        /// One chunk's datagram received: opened, written, and acknowledged when due.
        mutating func receiveChunk(counted: Bool) throws {
            let datagram = datagrams[nextDatagram]
            nextDatagram += 1
            now = now + .microseconds(100)
            let arrival = try marks.measure(if: counted) { () -> FileReceiver.Arrival in
                let message = try MessageCodec.decode(try chunkOpener.open(datagram).payload)
                let arrival = receiver.chunkArrived(message, now: now)
                if case .write(let offset, let plaintext) = arrival { try PartFile.write(plaintext, at: offset, to: part) }
                if let ack = receiver.pollAck(from: "bob", now: now) { _ = ackSealer.seal(ack) }
                return arrival
            }
            if case .rejected(let why) = arrival { throw WorkloadError("the receiver rejected a chunk: \(why)") }
        }
    }
}
