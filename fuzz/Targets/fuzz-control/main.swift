import SIMPFuzz

/// libFuzzer's per-input callback: one untrusted control stream (first byte: how it is cut).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzControl(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    do { try FuzzEntry.control(UnsafeRawBufferPointer(start: data, count: size)) } catch {
        fatalError("\(error)")
    }
    return 0
}
