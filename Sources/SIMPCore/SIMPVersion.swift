/// The version of this SIMP build (programs, libraries and relay), as `--version` and the
/// relay's `simp_build_info` metric report it. Not the wire protocol's version
/// (`SIMPMessage.currentVersion`).
public enum SIMPVersion {
    public static let current = "0.16.0"
}
