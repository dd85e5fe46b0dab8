// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "SIMP",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "simp-server", targets: ["simp-server"]),
        .executable(name: "simp", targets: ["simp"]),
        .executable(name: "simp-lab", targets: ["simp-lab"]),
        .executable(name: "simp-bench", targets: ["simp-bench"]),
        .executable(name: "simp-bench-guard", targets: ["simp-bench-guard"]),
        .library(name: "SIMPCore", targets: ["SIMPCore"]),
        .library(name: "SIMPRelay", targets: ["SIMPRelay"]),
        .library(name: "SIMPClient", targets: ["SIMPClient"]),
        .library(name: "SIMPChat", targets: ["SIMPChat"]),
        .library(name: "SIMPLab", targets: ["SIMPLab"]),
        .library(name: "SIMPFuzz", targets: ["SIMPFuzz"]),
        // For tests of any target, and of third-party clients (docs/ARCHITECTURE.md, "Testing
        // against SIMP"); no XCTest inside, so non-test targets (simp-lab) can link it too.
        .library(name: "SIMPTestKit", targets: ["SIMPTestKit", "SIMPCoreTestKit"]),
        .library(name: "SIMPCoreTestKit", targets: ["SIMPCoreTestKit"]),
        .library(name: "SIMPE2E", targets: ["SIMPE2E"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/LebJe/TOMLKit.git", from: "0.6.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/swiftlang/swift-subprocess.git", from: "1.0.2"),
        .package(url: "https://github.com/apple/swift-system.git", from: "1.8.1"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
    ],
    targets: [
        // C libraries from Debian, found through pkg-config.
        .systemLibrary(
            name: "CProtobufC", pkgConfig: "libprotobuf-c",
            providers: [.apt(["libprotobuf-c-dev"])]),
        // hiredis without pkg-config: its headers and library are in the default paths, and its
        // .pc adds -D_FILE_OFFSET_BITS=64, which SwiftPM drops with a warning on every build.
        .systemLibrary(name: "CHiredis", providers: [.apt(["libhiredis-dev"])]),
        // protoc-c output for proto/simp.proto, committed; scripts/generate-proto regenerates it.
        .target(name: "CSIMPProto", dependencies: ["CProtobufC"]),

        // Sans-I/O protocol and reliability core: no sockets, injected clock.
        .target(
            name: "SIMPCore",
            dependencies: [
                "CSIMPProto", "CProtobufC", "SIMPE2E",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ]),
        // End-to-end encryption, sans-I/O: device keys, key bundles, session start, Double
        // Ratchet, room sender keys, safety numbers (docs/E2E.md). Only Crypto; time and
        // randomness are passed in.
        .target(
            name: "SIMPE2E",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")]),
        // Access tokens (JWT, docs/PROTOCOL.md §4.9): the relay's signature check against a JWKS
        // (jwt-kit), and minting keys and tokens for `simp-server token`. No I/O.
        .target(
            name: "SIMPTokens",
            dependencies: [
                "SIMPCore", .product(name: "JWTKit", package: "jwt-kit"), .product(name: "Crypto", package: "swift-crypto"),
            ]),
        // SwiftNIO glue shared by the relay, the client and the bench: control-channel framing handlers.
        .target(
            name: "SIMPNIO",
            dependencies: ["SIMPCore", .product(name: "NIOCore", package: "swift-nio")]),
        // Per-input functions of the fuzz targets (built with libFuzzer by scripts/fuzz from
        // fuzz/Package.swift) and their seed corpus; the regression tests call them too.
        .target(
            name: "SIMPFuzz",
            dependencies: ["SIMPCore", "SIMPNIO", "SIMPE2E", .product(name: "NIOCore", package: "swift-nio")]),
        // Redis on SwiftNIO with hiredis as the RESP codec: single node, pub/sub, Cluster, TLS.
        .target(
            name: "SIMPRedis",
            dependencies: [
                "CHiredis",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]),
        // Processes the tools and the tests start on this machine: a private redis-server, free
        // loopback ports, and LaunchedProcess, the one launcher of children that outlive a call.
        .target(
            name: "SIMPLocalServers",
            dependencies: [
                "SIMPRedis",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]),
        // The relay: SwiftNIO shells around the core, registry in Redis.
        .target(
            name: "SIMPRelay",
            dependencies: [
                "SIMPCore", "SIMPNIO", "SIMPRedis", "SIMPTokens",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),
        // Helpers of the command-line tools (`simp` and `simp-server`): settings from a TOML file
        // and the environment, reading a password, readable socket errors.
        .target(
            name: "SIMPCommandLine",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "TOMLKit", package: "TOMLKit"),
            ]),
        // The client library behind `simp`.
        .target(
            name: "SIMPClient",
            dependencies: [
                "SIMPCore", "SIMPNIO", "SIMPCommandLine", "SIMPE2E",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "TOMLKit", package: "TOMLKit"),
            ]),
        // wcwidth(3) asked in a UTF-8 locale of its own (the process's may be C), for `simp chat`'s columns.
        .target(name: "CTerminalColumns"),
        // Network namespaces and TUN devices for the lab's real TCP transfer (unshare, setns, ioctl).
        .target(name: "CNetworkNamespace"),
        // `simp chat`: line editor, key decoder, renderer, commands, history (pure state machines)
        // and the terminal shell that ties them to a SIMPClient.
        .target(
            name: "SIMPChat",
            dependencies: [
                "SIMPClient", "SIMPCore", "CTerminalColumns",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // The relay's real engine and handlers on NIO's EmbeddedEventLoop, time moved by the caller:
        // for tests of the relay, of clients (third-party ones too), and for the simulator.
        .target(
            name: "SIMPTestKit",
            dependencies: [
                "SIMPCore", "SIMPNIO", "SIMPRelay",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]),
        // DevRelay: the relay's sans-I/O core driven one entry point at a time, with each user's
        // client keys; only the core's dependencies, so the core's tests need nothing more.
        .target(
            name: "SIMPCoreTestKit",
            dependencies: ["SIMPCore", "SIMPE2E", .product(name: "NIOCore", package: "swift-nio")]),
        // Shared by the test targets: start Redis, a relay and clients on free loopback ports.
        .target(
            name: "SIMPTestSupport",
            dependencies: [
                "SIMPRelay", "SIMPClient", "SIMPCommandLine", "SIMPCore", "SIMPRedis", "SIMPNIO", "SIMPLocalServers",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                // One-shot tools (ToolProcess); long-running children are SIMPLocalServers' LaunchedProcess.
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]),

        // Packet-loss scenarios: link model, simulator (virtual time), real-socket runner, report.
        .target(
            name: "SIMPLab",
            dependencies: [
                "SIMPCore", "SIMPRelay", "SIMPClient", "SIMPRedis", "SIMPLocalServers", "SIMPTestKit", "SIMPE2E", "CNetworkNamespace",
                "SIMPBench", // LocalRelay: real mode's relay as a process of its own
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]),

        .executableTarget(
            name: "simp-server",
            dependencies: [
                "SIMPRelay", "SIMPCommandLine", "SIMPCore", "SIMPRedis", "SIMPTokens",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "server"),
        // Load generator: the bench's logic lives in SIMPBench, the executable parses flags.
        .target(
            name: "SIMPBench",
            dependencies: [
                "SIMPCore", "SIMPNIO", "SIMPRedis", "SIMPRelay", "SIMPLocalServers", "SIMPClient",
                "SIMPTestKit", "SIMPCoreTestKit", "SIMPE2E", "CCallgrind",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // Counting allocator wrappers for simp-bench's allocation figures (linked there only).
        .target(name: "CAllocationCounter"),
        // callgrind's client requests as C functions (no-ops outside valgrind), for scripts/bench-guard.
        .target(name: "CCallgrind"),
        // scripts/bench-guard's workloads and baseline check; synchronous, so valgrind can run it.
        .executableTarget(
            name: "simp-bench-guard",
            dependencies: ["SIMPBench", .product(name: "ArgumentParser", package: "swift-argument-parser")]),
        .executableTarget(
            name: "simp-bench",
            dependencies: [
                "SIMPBench", "CAllocationCounter", "SIMPCore", "SIMPRedis",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]),
        .executableTarget(
            name: "simp",
            dependencies: [
                "SIMPClient", "SIMPChat", "SIMPCommandLine", "SIMPCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "client"),
        .executableTarget(
            name: "simp-lab",
            dependencies: [
                "SIMPLab", "SIMPCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),

        .testTarget(
            name: "SIMPCoreTests",
            dependencies: [
                "SIMPCore", "SIMPCoreTestKit", "SIMPTokens", "SIMPE2E", .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Subprocess", package: "swift-subprocess"), .product(name: "SystemPackage", package: "swift-system"),
            ]),
        .testTarget(name: "SIMPE2ETests", dependencies: ["SIMPE2E", "SIMPCore", .product(name: "Crypto", package: "swift-crypto")]),
        .testTarget(name: "SIMPTokensTests", dependencies: ["SIMPTokens", "SIMPCore"]),
        .testTarget(name: "SIMPNIOTests", dependencies: ["SIMPNIO", "SIMPCore", .product(name: "NIOCore", package: "swift-nio")]),
        .testTarget(
            name: "SIMPRedisTests",
            dependencies: [
                "SIMPRedis", "SIMPTestSupport", "SIMPLocalServers",
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"), .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(
            name: "SIMPRelayTests",
            dependencies: [
                "SIMPRelay", "SIMPClient", "SIMPCommandLine", "SIMPCore", "SIMPRedis", "SIMPTestSupport", "SIMPBench", "SIMPFuzz", "SIMPTokens",
                "SIMPLab", "SIMPNIO", "SIMPLocalServers", "SIMPTestKit", "SIMPCoreTestKit", "SIMPE2E",
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"), .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"), .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]),
        .testTarget(
            name: "SIMPClientTests",
            dependencies: [
                "SIMPClient", "SIMPCommandLine", "SIMPCore", "SIMPE2E", "SIMPRedis", "SIMPRelay", "SIMPTestSupport", "SIMPLocalServers",
                "SIMPTestKit", .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "MetricsTestKit", package: "swift-metrics"), .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(
            name: "SIMPChatTests",
            dependencies: [
                "SIMPChat", "SIMPClient", "SIMPCommandLine", "SIMPCore", "SIMPTestSupport",
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(name: "SIMPFuzzTests", dependencies: ["SIMPFuzz", "SIMPCore", "SIMPE2E"]),
        .testTarget(
            name: "SIMPLabTests", dependencies: ["SIMPLab", "SIMPCore", "SIMPTestSupport", .product(name: "NIOCore", package: "swift-nio")]),
        .testTarget(
            name: "SIMPBenchTests",
            dependencies: [
                "SIMPBench", "SIMPCore", "SIMPRelay", "SIMPTestSupport",
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]),
    ],
    swiftLanguageModes: [.v6]
)
