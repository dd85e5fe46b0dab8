import XCTest

@testable import SIMPBench

final class DeliveredIdsTests: XCTestCase {
    func testEachIdIsNewOnceInAnyOrder() {
        var ids = DeliveredIds()
        let first: UInt64 = 1_764_000_000_000_000
        let order = (0..<300).map { first + UInt64($0) }.shuffled()
        for id in order { XCTAssertTrue(ids.insert(id), "\(id) first time") }
        for id in order { XCTAssertFalse(ids.insert(id), "\(id) again") }
    }

    func testIdsBelowTheFirstAndFarAwayAreKeptToo() {
        var ids = DeliveredIds()
        XCTAssertTrue(ids.insert(1_000))
        XCTAssertTrue(ids.insert(999), "just below the first")
        XCTAssertTrue(ids.insert(1), "far below, still in reach")
        XCTAssertTrue(ids.insert(1_000 + DeliveredIds.maximumSpan * 3), "beyond the span: kept aside")
        XCTAssertTrue(ids.insert(UInt64.max))
        for id: UInt64 in [1_000, 999, 1, 1_000 + DeliveredIds.maximumSpan * 3, .max] {
            XCTAssertFalse(ids.insert(id), "\(id) again")
        }
        XCTAssertTrue(ids.insert(2))
        XCTAssertTrue(ids.insert(0))
    }
}
