/// The version every SIMP executable prints with `--version`.
public enum SIMPVersion {
    public static let current = "0.16.0"
}
