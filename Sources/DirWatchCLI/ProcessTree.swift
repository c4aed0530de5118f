import Glibc

/// The processes below dirwatch, read from /proc. With dirwatch a child subreaper
/// (``CommandRunner``), every process a run starts stays below it, whatever group or session it
/// moves to and however many times it forks: when its parent ends, it becomes dirwatch's child.
enum ProcessTree {
    /// Every living descendant of `ancestor` (ended ones, not yet reaped, left out), parents
    /// before their children. Read from each process's `/proc/PID/stat`; one that ends meanwhile
    /// is passed over.
    static func descendants(of ancestor: pid_t) -> [pid_t] {
        var children: [pid_t: [pid_t]] = [:]
        guard let proc = opendir("/proc") else { return [] }
        defer { closedir(proc) }
        while let entry = readdir(proc) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let pid = pid_t(name), let (parent, state) = parentAndState(of: pid), state != "Z" else { continue }
            children[parent, default: []].append(pid)
        }
        var found: [pid_t] = []
        var next = children[ancestor] ?? []
        while let pid = next.popLast() {
            found.append(pid)
            next += children[pid] ?? []
        }
        return found
    }

    /// The parent and the state letter of `pid` (`R`, `S`, `Z`…), from `/proc/PID/stat`:
    /// `pid (comm) state ppid …`, where comm may hold spaces and parentheses, so the fields are
    /// read after the last `)`.
    static func parentAndState(of pid: pid_t) -> (pid_t, Character)? {
        let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        guard count > 0 else { return nil }
        return parseStat(buffer[..<count])
    }

    static func parseStat(_ line: ArraySlice<UInt8>) -> (pid_t, Character)? {
        guard let close = line.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = line[(close + 1)...].split(separator: UInt8(ascii: " "), maxSplits: 3)
        guard fields.count >= 2, fields[0].count == 1,
            let parent = pid_t(String(decoding: fields[1], as: UTF8.self))
        else { return nil }
        return (parent, Character(UnicodeScalar(fields[0].first!)))
    }
}
