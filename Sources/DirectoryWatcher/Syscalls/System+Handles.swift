import CDirectoryWatcherShims
import Glibc

/// File handles: a file system's id, an entry's handle, and opening by a handle.
extension System {
    /// The id of the file system of the open `fd` (`fstatfs`'s `f_fsid`), as a file handle's key
    /// holds it.
    func fileSystemID(_ fd: Int32) throws(SyscallError) -> [UInt8] {
        var id = [UInt8](repeating: 0, count: 8)
        _ = try id.withUnsafeMutableBufferPointer { buffer throws(SyscallError) in
            try retrying("fstatfs") { calls.fileSystemID(fd, buffer.baseAddress!) }
        }
        return id
    }

    /// The handle of `name` in the open directory `directory`, or of `directory` itself (nil),
    /// keyed with its file system's id. `EOPNOTSUPP`: the file system gives no handles.
    func fileHandle(in directory: Int32, name: [UInt8]?, fileSystemID: [UInt8]) throws(SyscallError) -> KernelHandle {
        var type: Int32 = 0
        var length: UInt32 = 128
        var bytes = [UInt8](repeating: 0, count: 128)
        _ = try bytes.withUnsafeMutableBufferPointer { buffer throws(SyscallError) in
            try retrying("name_to_handle_at") {
                if let name {
                    return (name + [0]).withUnsafeBufferPointer { terminated in
                        terminated.withMemoryRebound(to: CChar.self) {
                            calls.nameToHandle(directory, $0.baseAddress!, &type, buffer.baseAddress!, &length)
                        }
                    }
                }
                return calls.nameToHandle(directory, nil, &type, buffer.baseAddress!, &length)
            }
        }
        return KernelHandle(fileSystemID: fileSystemID, type: type, bytes: bytes[..<Int(length)])
    }

    /// A descriptor (`O_PATH`) of the object `handle` names, on the file system `mountFD` is
    /// open on. `ESTALE`: the object is gone.
    func open(_ handle: KernelHandle, mountFD: Int32) throws(SyscallError) -> Int32 {
        let bytes = Array(handle.bytes)
        return try bytes.withUnsafeBufferPointer { buffer throws(SyscallError) in
            try retrying("open_by_handle_at") {
                calls.openByHandle(mountFD, handle.type, buffer.baseAddress!, UInt32(buffer.count))
            }
        }
    }
}
