import SIMPRedis
import XCTest

final class RedisURLTests: XCTestCase {
    func testParsesHostPortAndDatabase() throws {
        XCTAssertEqual(try RedisURL(parsing: "redis://10.0.0.5:6380/2"), RedisURL(host: "10.0.0.5", port: 6380, database: 2))
        XCTAssertEqual(try RedisURL(parsing: "redis://localhost"), RedisURL(host: "localhost", port: 6379, database: 0))
        XCTAssertEqual(try RedisURL(parsing: "redis://[::1]:7000"), RedisURL(host: "::1", port: 7000))
        XCTAssertEqual(RedisURL(host: "::1", port: 7000, database: 1).description, "redis://[::1]:7000/1")
    }

    func testParsesPasswordsAndACLUsers() throws {
        XCTAssertEqual(
            try RedisURL(parsing: "redis://:secret@127.0.0.1:26390"),
            RedisURL(host: "127.0.0.1", port: 26390, password: "secret"))
        XCTAssertEqual(
            try RedisURL(parsing: "redis://alice:p%40ss:w@redis.example:6380/3"),
            RedisURL(host: "redis.example", port: 6380, database: 3, user: "alice", password: "p@ss:w"))
        XCTAssertEqual(try RedisURL(parsing: "redis://secret@host"), RedisURL(host: "host", password: "secret"))
    }

    func testParsesTLSOptions() throws {
        let url = try RedisURL(parsing: "rediss://:pw@cache.example:6380?ca=/etc/ca.pem&cert=/etc/c.pem&key=/etc/c.key")
        XCTAssertEqual(url.tls, RedisTLS(caFile: "/etc/ca.pem", certificateFile: "/etc/c.pem", keyFile: "/etc/c.key"))
        XCTAssertEqual(try RedisURL(parsing: "rediss://cache.example").tls, RedisTLS())
        XCTAssertNil(try RedisURL(parsing: "redis://cache.example").tls)
        XCTAssertEqual(url.description, "rediss://:***@cache.example:6380?ca=/etc/ca.pem&cert=/etc/c.pem&key=/etc/c.key")
    }

    func testDescriptionsAndErrorsNeverShowThePassword() throws {
        for text in ["redis://:hunter2@127.0.0.1:26390", "redis://bob:hunter2@h/1", "rediss://hunter2@h:1"] {
            let url = try RedisURL(parsing: text)
            XCTAssertFalse("\(url)".contains("hunter2"), "\(url)")
            XCTAssertTrue("\(url)".contains("***"), "\(url)")
        }
        for text in ["redis://:hunter2@host:99999", "redis://bob:hunter2@host/x", "http://:hunter2@h", "redis://:hunter2@h?ca=x"] {
            XCTAssertThrowsError(try RedisURL(parsing: text), text) { error in
                XCTAssertFalse("\(error)".contains("hunter2"), "\(error)")
            }
        }
    }

    func testRejectsWhatIsNotARedisURL() {
        for text in [
            "127.0.0.1:6379", "redis://", "redis://host:0", "redis://host:99999", "redis://host/x",
            "rediss://h?cert=/c.pem", "rediss://h?nope=1", "redis://:%zz@h",
        ] {
            XCTAssertThrowsError(try RedisURL(parsing: text), text)
        }
    }
}

final class RedisKeySlotTests: XCTestCase {
    func testSlotsMatchTheClusterSpecification() {
        // Values as `CLUSTER KEYSLOT` answers them.
        XCTAssertEqual(RedisKeySlot.slot(of: "foo"), 12182)
        XCTAssertEqual(RedisKeySlot.slot(of: "bar"), 5061)
        XCTAssertEqual(RedisKeySlot.slot(of: "123456789"), 0x31C3 % 16384)
        XCTAssertEqual(RedisKeySlot.slot(of: ""), 0)
    }

    func testHashTagsPickTheHashedPart() {
        XCTAssertEqual(RedisKeySlot.slot(of: "simp:user:{alice}"), RedisKeySlot.slot(of: "alice"))
        XCTAssertEqual(RedisKeySlot.slot(of: "simp:seen:{alice}"), RedisKeySlot.slot(of: "simp:inbox:{alice}:log"))
        XCTAssertEqual(RedisKeySlot.slot(of: "a{}b"), RedisKeySlot.slot(of: "a{}b"))
        XCTAssertNotEqual(RedisKeySlot.slot(of: "a{}b"), RedisKeySlot.slot(of: ""))
        XCTAssertEqual(RedisKeySlot.slot(of: "x{#room}{y}"), RedisKeySlot.slot(of: "#room"))
        XCTAssertEqual(RedisKeySlot.slot(of: "{{a}}"), RedisKeySlot.slot(of: "{a"))
    }
}

final class RedisEndpointTests: XCTestCase {
    func testParsesSingleServersAndClusters() throws {
        XCTAssertEqual(try RedisEndpoint(parsing: "redis://:pw@h:1/2"), .single(RedisURL(host: "h", port: 1, database: 2, password: "pw")))
        let cluster = try RedisEndpoint(parsing: "rediss+cluster://u:pw@a:7000,b:7001,[::1]:7002?ca=/ca.pem")
        let tls = RedisTLS(caFile: "/ca.pem")
        XCTAssertEqual(
            cluster,
            .cluster(seeds: [
                RedisURL(host: "a", port: 7000, user: "u", password: "pw", tls: tls),
                RedisURL(host: "b", port: 7001, user: "u", password: "pw", tls: tls),
                RedisURL(host: "::1", port: 7002, user: "u", password: "pw", tls: tls),
            ]))
        XCTAssertFalse(cluster.description.contains("pw@"), cluster.description)
        for text in ["redis+cluster://", "redis+cluster://:pw@a:1/3", "redis+cluster://a:1,b:0"] {
            XCTAssertThrowsError(try RedisEndpoint(parsing: text), text) { XCTAssertFalse("\($0)".contains("pw"), "\($0)") }
        }
    }
}

final class RedisURLTextTests: XCTestCase {
    func testTextWithPasswordParsesBackToTheSameURL() throws {
        for text in ["redis://:p%40ss%3Aw%2F%25 x@h:1/2", "rediss://bob:simple@h:6380?ca=/ca.pem", "redis://h:1"] {
            let url = try RedisURL(parsing: text)
            XCTAssertEqual(try RedisURL(parsing: url.textWithPassword), url, url.textWithPassword)
        }
        for text in ["redis+cluster://:p%40ss@h:1,h:2,[::1]:3", "rediss+cluster://bob:simple@h:6380,g:6381?ca=/ca.pem", "redis+cluster://h:1"] {
            let endpoint = try RedisEndpoint(parsing: text)
            XCTAssertEqual(try RedisEndpoint(parsing: endpoint.textWithPassword), endpoint, endpoint.textWithPassword)
        }
    }
}
