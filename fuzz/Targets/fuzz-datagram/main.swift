import SIMPFuzz

/// libFuzzer's per-input callback: one untrusted UDP datagram.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDatagram(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    do { try FuzzEntry.datagram(UnsafeRawBufferPointer(start: data, count: size)) } catch {
        fatalError("\(error)")
    }
    return 0
}
