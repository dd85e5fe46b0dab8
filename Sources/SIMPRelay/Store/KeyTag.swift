/// The hash tags of the relay's Redis keys (docs/PROTOCOL.md §7): on Redis Cluster only the
/// part between `{` and `}` decides a key's slot, so every key of one user carries `{<user>}`
/// and every key of one room `{#<room>}`, and a user's (or a room's) keys can be written in one
/// `MULTI` or Lua script. On a single Redis the braces are just part of the names.
///
/// A store that adds keys follows the same rule: a per-user key is `simp:<what>:{<user>}…`
/// built with `user(_:)`, and one command, script or `MULTI` touches keys of one tag only.
public enum KeyTag {
    /// `{<user>}`, with `%`, `{` and `}` in the user id written `%25`, `%7B` and `%7D` so the
    /// tag always ends where the id does (and is never empty).
    public static func user(_ user: String) -> String {
        guard user.contains(where: { $0 == "%" || $0 == "{" || $0 == "}" }) else { return "{\(user)}" }
        var escaped = ""
        for character in user {
            switch character {
            case "%": escaped += "%25"
            case "{": escaped += "%7B"
            case "}": escaped += "%7D"
            default: escaped.append(character)
            }
        }
        return "{\(escaped)}"
    }

    /// `{#<room>}` (room names are letters, digits, `.`, `_` and `-`).
    public static func room(_ room: String) -> String { "{#\(room)}" }

    /// The user id of a key `<prefix>{<user>}` (as `SCAN` lists them), nil for any other key.
    public static func user(inKey key: String, prefix: String) -> String? {
        guard key.hasPrefix(prefix + "{"), key.hasSuffix("}") else { return nil }
        let tag = key.dropFirst(prefix.count + 1).dropLast()
        guard !tag.contains("{"), !tag.contains("}") else { return nil }
        return tag.contains("%") ? unescaped(tag) : String(tag)
    }

    private static func unescaped(_ tag: Substring) -> String {
        tag.replacingOccurrences("%7B", with: "{").replacingOccurrences("%7D", with: "}").replacingOccurrences("%25", with: "%")
    }
}

extension StringProtocol {
    fileprivate func replacingOccurrences(_ target: String, with replacement: String) -> String {
        String(self).split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
