// dirwatch-docs: writes dirwatch's man page from its manual, so that the two agree (a test of
// DirWatchCLITests fails when the committed page is not what the manual makes). Run from the
// package's root:
//
//   swift run dirwatch-docs [--check] [MANUAL [PAGE]]
//
// MANUAL defaults to Docs/DirectoryWatcher.docc/Dirwatch.md, PAGE to Docs/man/dirwatch.1.
// --check writes nothing and exits 1 when PAGE is not what MANUAL makes.
import DirWatchCLI
import Foundation

var arguments = Array(CommandLine.arguments.dropFirst())
let check = arguments.first == "--check"
if check { arguments.removeFirst() }
guard arguments.count <= 2, !(arguments.first?.hasPrefix("-") ?? false) else {
    FileHandle.standardError.write(Data("usage: dirwatch-docs [--check] [MANUAL [PAGE]]\n".utf8))
    exit(2)
}
let manualPath = arguments.first ?? "Docs/DirectoryWatcher.docc/Dirwatch.md"
let pagePath = arguments.count > 1 ? arguments[1] : "Docs/man/dirwatch.1"

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("dirwatch-docs: \(message)\n".utf8))
    exit(1)
}

let manual: String
do {
    manual = try String(contentsOfFile: manualPath, encoding: .utf8)
} catch {
    fail("cannot read \(manualPath) (run from the package's root, or name the manual): \(error.localizedDescription)")
}
let page = ManualPage.roff(fromManual: manual)
let current = try? String(contentsOfFile: pagePath, encoding: .utf8)
if check {
    guard current == page else { fail("\(pagePath) is not what \(manualPath) makes: run swift run dirwatch-docs") }
    print("dirwatch-docs: \(pagePath) is up to date")
} else if current == page {
    print("dirwatch-docs: \(pagePath) is up to date")
} else {
    do {
        let directory = URL(fileURLWithPath: pagePath).deletingLastPathComponent()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try page.write(toFile: pagePath, atomically: true, encoding: .utf8)
    } catch {
        fail("cannot write \(pagePath): \(error.localizedDescription)")
    }
    print("dirwatch-docs: wrote \(pagePath)")
}
