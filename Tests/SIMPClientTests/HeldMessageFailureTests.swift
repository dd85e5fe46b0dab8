import SIMPCore
import XCTest

@testable import SIMPClient

/// What a held message that can never be sealed reports (ClientEngine+HeldForKeys): a refusal
/// made on this device says so and what to do, and is not passed off as the relay's.
final class HeldMessageFailureTests: XCTestCase {
    func testAVerifiedContactsChangedKeyIsRefusedHereNotByTheRelay() {
        let reason =
            "not sent to bob: bob is verified, and the identity key of bob's device phone changed since (or the device is new); "
            + "compare the safety numbers (simp keys --with bob), then accept the new key with `simp keys --with bob --accept`"
        let failure = HeldForKeys.failure(SIMPClientError.notEncryptable(reason))
        XCTAssertEqual(failure, .notSent(reason))
        let text = MessageFormatting.outcomeText(.failed(messageId: 7, failure))
        XCTAssertEqual(text, "not delivered: " + reason)
        XCTAssertFalse(text.contains("relay refused") || text.contains("BAD_REQUEST") || text.contains("not sent: not sent"), text)
    }

    func testARefusalByTheRelayStaysTheRelays() {
        let failure = HeldForKeys.failure(SIMPClientError.rejected(.unknownRecipient, "no such user: bob"))
        XCTAssertEqual(failure, .rejected(.unknownRecipient, "no such user: bob"))
        XCTAssertEqual(HeldForKeys.failure(SIMPClientError.connectionLost), .notSent("connection to the relay was lost"))
    }
}
