import Foundation
import SIMPCore

/// The relay's news that a file this user sent through it (held for a receiver who was
/// offline, or forwarded from its copy) reached a device of the receiver, whole and verified:
/// the file's ✓✓ (a FILE_ACK with `fileReceived`, docs/PROTOCOL.md §5.7). `simp chat` turns the
/// file's line ✓✓; `simp listen` prints it (a line, or a JSON event with `--json`), and
/// `simp send --file --wait-received` waits for it.
public struct FileReceivedNews: Equatable, Sendable {
    public var fileId: UInt64
    /// The receiver and its device that has the file.
    public var receiver: String
    public var device: String
    /// The file's name, from the record this device kept when the relay held the file (nil:
    /// sent from another device, or the record is gone).
    public var name: String?

    public init(fileId: UInt64, receiver: String, device: String, name: String?) {
        self.fileId = fileId
        self.receiver = receiver
        self.device = device
        self.name = name
    }

    /// The news `notice` carries (nil for other notices), the file named from the records under `home`.
    public init?(_ notice: DeliveryNotice, home: URL = SIMPHome.directory()) {
        guard case .fileReceived(let fileId, let receiver, let device) = notice else { return nil }
        self.init(fileId: fileId, receiver: receiver, device: device, name: OutgoingFileRecord.heldName(home: home, fileId: fileId))
    }

    /// `✓✓ file report.pdf (id 42) reached bob's device phone: whole, its digest matched`.
    public var line: String {
        let file = name.map { "file \($0) (id \(fileId))" } ?? "file \(fileId)"
        return "✓✓ \(file) reached \(receiver)'s device \(device.isEmpty ? "?" : device): whole, its digest matched"
    }

    /// `{"event": "fileReceived", "fileId": 42, "name": "report.pdf", "user": "bob", "device": "phone", "text": …}`
    /// (`name` only when known), in the style of `simp listen --json`'s other events.
    public var jsonLine: String {
        var object: [String: Any] = ["event": "fileReceived", "fileId": fileId, "user": receiver, "device": device, "text": line]
        if let name { object["name"] = name }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}
