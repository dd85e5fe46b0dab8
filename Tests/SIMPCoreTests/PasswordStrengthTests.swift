import SIMPCore
import XCTest

/// `simp-server user add` refuses weak passwords and says why.
final class PasswordStrengthTests: XCTestCase {
    func testWeakPasswordsAreRefusedWithTheReason() {
        let refused =
            [
                ("a", "it has 1 character; at least 10 are needed"),
                ("correcthor", nil),
                ("aaaaaaaaaaaa", "it is one character repeated"),
                ("alice-is-great", "it contains the user name"),
                ("0123498765", "it is only digits"),
                ("Password123!", "it is one of the passwords guessers try first"),
                ("qwertyuiop", "it is one of the passwords guessers try first"),
                ("abcdefghijk", "it is one of the passwords guessers try first"),
                ("four words of carol", nil),
            ] as [(String, String?)]
        for (password, reason) in refused {
            XCTAssertEqual(PasswordStrength.weakness(of: password, user: "Alice"), reason, password)
        }
    }
}
