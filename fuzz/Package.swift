// swift-tools-version:5.4
// libFuzzer executables for SIMP's untrusted-input paths. Built only by scripts/fuzz, with
// `-sanitize=fuzzer,address -parse-as-library` (libFuzzer supplies `main`); a plain
// `swift build` of the SIMP package never sees this one. The per-input logic lives in the
// SIMPFuzz library, so the regression tests run exactly what these targets run.
// Tools version 5.4 on purpose: from 5.5 on, SwiftPM renames an executable's entry point
// (`--defsym main=<target>_main`), which a libFuzzer binary (whose `main` is libFuzzer's) lacks.
import PackageDescription

let package = Package(
    name: "SIMPFuzzTargets",
    dependencies: [.package(name: "SIMP", path: "..")],
    targets: [
        .executableTarget(
            name: "fuzz-datagram", dependencies: [.product(name: "SIMPFuzz", package: "SIMP")],
            path: "Targets/fuzz-datagram"),
        .executableTarget(
            name: "fuzz-control", dependencies: [.product(name: "SIMPFuzz", package: "SIMP")],
            path: "Targets/fuzz-control"),
        .executableTarget(
            name: "fuzz-e2e", dependencies: [.product(name: "SIMPFuzz", package: "SIMP")],
            path: "Targets/fuzz-e2e"),
    ]
)
