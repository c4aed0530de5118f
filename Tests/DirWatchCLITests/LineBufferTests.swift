import DirectoryWatcher
import Glibc
import Testing

@testable import DirWatchCLI

/// dirwatch's output buffer: the lines written are the bytes appended, across its growth and
/// its emptying, and the same as the formats write into an array.
@Suite struct LineBufferTests {
    /// What `write(to:from:)` writes, read back through a pipe.
    private func written(_ buffer: LineBuffer, from start: Int = 0) throws -> [UInt8] {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]) }
        #expect(buffer.write(to: ends[1], from: start))
        close(ends[1])
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(ends[0], &chunk, chunk.count)
            if count <= 0 { break }
            bytes += chunk[..<count]
        }
        return bytes
    }

    @Test func bytesLiteralsAndSlicesComeOutInOrderAcrossGrowth() throws {
        var buffer = LineBuffer()
        var expected: [UInt8] = []
        // Past the first storage (4 KiB) several times, with pieces of every kind and size.
        for round in 0..<3_000 {
            let piece = [UInt8](repeating: UInt8(ascii: "a") + UInt8(round % 26), count: round % 7)
            buffer.appendBytes(piece)
            expected += piece
            buffer.append("->")
            expected += Array("->".utf8)
            buffer.appendBytes(piece[piece.indices.dropFirst()])
            expected += piece.dropFirst()
            buffer.append(UInt8(ascii: "\n"))
            expected.append(UInt8(ascii: "\n"))
        }
        #expect(buffer.count == expected.count)
        #expect(try written(buffer) == expected)
        #expect(try written(buffer, from: 10) == Array(expected[10...]))
    }

    @Test func emptyingKeepsTheStorageAndForgetsTheBytes() throws {
        var buffer = LineBuffer()
        buffer.appendBytes([UInt8](repeating: UInt8(ascii: "x"), count: 5_000))
        let capacity = buffer.capacity
        buffer.removeAll()
        #expect(buffer.count == 0)
        #expect(buffer.capacity == capacity)
        buffer.append("new\n")
        #expect(try written(buffer) == Array("new\n".utf8))
    }

    @Test func theFormatsWriteTheSameIntoItAsIntoAnArray() throws {
        let changes = [
            DirectoryChange(kind: .created, path: FileSystemPath("/d/plain"), isDirectory: false),
            DirectoryChange(kind: .removed, path: FileSystemPath("/d/a \"quoted\"\nname"), isDirectory: true),
            DirectoryChange(
                kind: .renamed, path: FileSystemPath("/d/new"), oldPath: FileSystemPath("/d/old ->"), isDirectory: false
            ),
        ]
        for json in [true, false] {
            var buffer = LineBuffer()
            var array: [UInt8] = []
            for change in changes {
                if json {
                    ChangeFormat.json(change, into: &buffer)
                    ChangeFormat.json(change, into: &array)
                } else {
                    ChangeFormat.text(change, color: true, into: &buffer)
                    ChangeFormat.text(change, color: true, into: &array)
                }
            }
            #expect(try written(buffer) == array)
        }
    }
}
