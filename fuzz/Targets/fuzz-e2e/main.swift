import SIMPFuzz

/// libFuzzer's per-input callback: untrusted end-to-end bytes (first byte: which decoder).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEndToEnd(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    do { try FuzzEntry.endToEnd(UnsafeRawBufferPointer(start: data, count: size)) } catch {
        fatalError("\(error)")
    }
    return 0
}
