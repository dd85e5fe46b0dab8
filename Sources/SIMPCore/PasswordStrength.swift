/// Whether a new password is too easy to guess (`simp-server user add` refuses one unless
/// `--allow-weak`; docs/PROTOCOL.md §4.2 says what a guesser with the stored verifier can do):
/// shorter than `minimumLength` characters, the user's name in it, one character repeated, only
/// digits, a run like "abcdefghij", or one of a small list of passwords that guessers try first
/// with digits or signs after it ("password123!").
public enum PasswordStrength {
    /// Passwords shorter than this are refused.
    public static let minimumLength = 10

    /// Why `password` is weak for `user`, for the operator; nil if it is not.
    public static func weakness(of password: String, user: String) -> String? {
        let lowered = password.lowercased()
        if password.count < minimumLength {
            return "it has \(password.count) character\(password.count == 1 ? "" : "s"); at least \(minimumLength) are needed"
        }
        if Set(password).count == 1 { return "it is one character repeated" }
        if !user.isEmpty, lowered.contains(user.lowercased()) { return "it contains the user name" }
        if password.allSatisfy(\.isNumber) { return "it is only digits" }
        let word = String(lowered.reversed().drop(while: { !$0.isLetter }).reversed())
        if common.contains(word) || isRun(lowered) { return "it is one of the passwords guessers try first" }
        return nil
    }

    /// Common passwords, as guessers try them with digits or signs after.
    static let common = [
        "password", "passw0rd", "p@ssw0rd", "qwertyuiop", "qwerty", "azerty", "asdfghjkl", "zxcvbnm", "iloveyou",
        "letmein", "welcome", "admin", "administrator", "changeme", "trustno1", "football", "baseball", "monkey",
        "dragon", "sunshine", "princess", "superman", "starwars", "whatever", "secret", "abc123", "1q2w3e4r", "123qwe",
    ]

    /// Characters in order, up or down ("abcdefghij", "zyxwvutsrq").
    static func isRun(_ password: String) -> Bool {
        let scalars = password.unicodeScalars.map { Int64($0.value) }
        let steps = Set(zip(scalars, scalars.dropFirst()).map { $1 - $0 })
        return steps == [1] || steps == [-1]
    }
}
