import SIMPE2E

/// What the relay checks of a published bundle before keeping it (docs/E2E.md §3.3, docs/
/// PROTOCOL.md §4.8): it decodes, no public key is of small order, and the identity signed its
/// prekeys. A bundle failing them could only ever be refused by each sender, and a key of small
/// order would make every agreement with it guessable; it is refused when published, with
/// ERROR BAD_KEY_BUNDLE naming what is wrong, so that senders never see it.
extension RelayCore {
    /// What is wrong with `bundle` (as KEYS_PUBLISH carries it) and `oneTimePrekeys`; nil when
    /// they pass.
    public static func keyBundleProblem(_ bundle: [UInt8], oneTimePrekeys: [[UInt8]]) -> String? {
        do {
            _ = try KeyBundle.checked(bundle)
            for encoded in oneTimePrekeys {
                let prekey = try OneTimePrekey(encoded: encoded)
                guard PublicKeyCheck.isUsableAgreementKey(prekey.publicKey) else {
                    throw E2EError.invalidKey("one-time prekey \(prekey.id) (low order)")
                }
            }
            return nil
        } catch {
            return "\(error)"
        }
    }

    /// Why `deviceList`, published by `user`, is refused (nil: it is kept): it must be a device
    /// list of `user` that decodes and whose signature verifies with the key it carries
    /// (docs/E2E.md §3.4). The relay trusts nothing in it; it only keeps out what no client
    /// could use.
    public static func deviceListProblem(_ deviceList: [UInt8], of user: String) -> String? {
        guard !deviceList.isEmpty else { return nil }
        do {
            let list = try SignedDeviceList(encoded: deviceList)
            return list.user == user ? nil : "a device list of \(list.user), not of \(user)"
        } catch {
            return "device list: \(error)"
        }
    }

    /// Refuses a KEYS_PUBLISH whose keys fail `keyBundleProblem` or `deviceListProblem`:
    /// counted, logged, answered with the section of docs/E2E.md that says what is checked
    /// (`section`: "3.3" for a bundle, "3.4" for a device list).
    func refuseBundle(
        _ message: SIMPMessage, from user: String, device: String, on connection: ConnectionID, _ problem: String, section: String,
        into output: inout [RelayAction]
    ) {
        let text = "key bundle refused: \(problem) (docs/E2E.md §\(section))"
        output += [
            .reject(.badKeyBundle, detail: "KEYS_PUBLISH from \(user)/\(device): \(problem)"),
            .send(connection, .error(.badKeyBundle, text, messageId: message.messageId)),
        ]
    }
}

extension RelayCore {
    /// The most bytes of bundles, prekeys and device names one KEYS_FETCH answer carries: the
    /// frame limit less room for the rest of the message.
    public static let maxKeysAnswerBytes = Framing.defaultMaxFrameSize - 4096

    /// The devices of a KEYS_FETCH answer that fit in `maxKeysAnswerBytes`, in order, and how
    /// many were left out (each device costs its name, bundle and prekey plus 8 bytes of tags;
    /// the user's device list, which is always sent, comes first).
    static func fittingKeysAnswer(_ devices: [DeviceKeys], deviceList: [UInt8] = []) -> (kept: [DeviceKeys], leftOut: Int) {
        var used = deviceList.count
        var kept: [DeviceKeys] = []
        for device in devices {
            used += device.device.utf8.count + device.bundle.count + (device.oneTimePrekey?.count ?? 0) + 8
            if used > maxKeysAnswerBytes { break }
            kept.append(device)
        }
        return (kept, devices.count - kept.count)
    }
}
