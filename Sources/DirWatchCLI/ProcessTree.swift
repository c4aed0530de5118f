import Glibc

/// The processes below dirwatch, read from /proc. With dirwatch a child subreaper
/// (``CommandRunner``), every process a run starts stays below it, whatever group or session it
/// moves to and however many times it forks: when its parent ends, it becomes dirwatch's child.
enum ProcessTree {
    /// A process below the ancestor, and its process group.
    struct Process: Equatable {
        var pid: pid_t
        var group: pid_t
    }

    /// Every living descendant of `ancestor` (ended ones, not yet reaped, left out), parents
    /// before their children. Read from each process's `/proc/PID/stat`; one that ends meanwhile
    /// is passed over.
    static func descendants(of ancestor: pid_t) -> [Process] {
        var children: [pid_t: [Process]] = [:]
        guard let proc = opendir("/proc") else { return [] }
        defer { closedir(proc) }
        while let entry = readdir(proc) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let pid = pid_t(name), let stat = stat(of: pid), stat.state != "Z" else { continue }
            children[stat.parent, default: []].append(Process(pid: pid, group: stat.group))
        }
        var found: [Process] = []
        var next = children[ancestor] ?? []
        while let process = next.popLast() {
            found.append(process)
            next += children[process.pid] ?? []
        }
        return found
    }

    /// What `/proc/PID/stat` says of a process's place.
    struct Stat: Equatable {
        var state: Character
        var parent: pid_t
        var group: pid_t
    }

    /// The state letter of `pid` (`R`, `S`, `Z`…), its parent and its process group, from
    /// `/proc/PID/stat`: `pid (comm) state ppid pgrp …`, where comm may hold spaces and
    /// parentheses, so the fields are read after the last `)`.
    static func stat(of pid: pid_t) -> Stat? {
        let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        guard count > 0 else { return nil }
        return parseStat(buffer[..<count])
    }

    static func parseStat(_ line: ArraySlice<UInt8>) -> Stat? {
        guard let close = line.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = line[(close + 1)...].split(separator: UInt8(ascii: " "), maxSplits: 4)
        guard fields.count >= 3, fields[0].count == 1,
            let parent = pid_t(String(decoding: fields[1], as: UTF8.self)),
            let group = pid_t(String(decoding: fields[2], as: UTF8.self))
        else { return nil }
        return Stat(state: Character(UnicodeScalar(fields[0].first!)), parent: parent, group: group)
    }
}
