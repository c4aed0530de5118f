import XCTest

@testable import DirWatchCLI

final class ArgumentTests: XCTestCase {
    private func options(_ arguments: [String]) throws -> Options {
        guard case .watch(let options) = try parseArguments(arguments) else {
            XCTFail("expected a watch")
            return Options()
        }
        return options
    }

    private func usageError(_ arguments: [String]) -> String? {
        do {
            _ = try parseArguments(arguments)
            return nil
        } catch {
            return error.description
        }
    }

    func testPathsAndFlags() throws {
        let parsed = try options(["-j", "a", "--once", "b", "-e", "*.tmp", "--exclude=.git"])
        XCTAssertEqual(parsed.paths, ["a", "b"])
        XCTAssertTrue(parsed.json)
        XCTAssertTrue(parsed.once)
        XCTAssertEqual(parsed.excludes, ["*.tmp", ".git"])
        XCTAssertNil(parsed.exec)
    }

    func testExecTakesTheRestVerbatim() throws {
        let parsed = try options([".", "--restart", "--exec", "make", "-j", "--json", "a b"])
        XCTAssertEqual(parsed.exec, ["make", "-j", "--json", "a b"])
        XCTAssertTrue(parsed.restart)
        XCTAssertFalse(parsed.json, "options after --exec belong to the command")
    }

    func testDoubleDashEndsOptions() throws {
        XCTAssertEqual(try options(["--", "-weird-dir", "--json"]).paths, ["-weird-dir", "--json"])
    }

    func testSettleAndRecursiveParse() throws {
        let parsed = try options(["-r", "--settle", "0.5", "."])
        XCTAssertTrue(parsed.recursive)
        XCTAssertEqual(parsed.settle, 0.5)
        XCTAssertEqual(try options(["--settle=2", "."]).settle, 2)
    }

    func testHelpAndVersion() throws {
        XCTAssertEqual(try parseArguments(["--help"]), .help)
        XCTAssertEqual(try parseArguments([".", "-h"]), .help)
        XCTAssertEqual(try parseArguments(["--version"]), .version)
    }

    func testUsageErrorsAreOneLineAndNameTheProblem() {
        let cases: [([String], String)] = [
            ([], "no directory to watch"),
            (["--bogus", "."], "unknown option '--bogus'"),
            (["--exclude"], "--exclude needs a value"),
            (["--exclude", "", "."], "--exclude needs a non-empty pattern"),
            (["--settle", "soon", "."], "--settle takes a number of seconds, not 'soon'"),
            (["--settle", "-1", "."], "--settle takes a number of seconds, not '-1'"),
            ([".", "--exec"], "--exec needs a command"),
            (["--restart", "."], "--restart goes with --exec"),
            ([""], "an empty path is not a directory; use . for the current one"),
            (["--json=yes", "."], "--json takes no value"),
        ]
        for (arguments, message) in cases {
            let error = usageError(arguments)
            XCTAssertEqual(error, "dirwatch: \(message) (see dirwatch --help)", "\(arguments)")
            XCTAssertFalse(error?.contains("\n") ?? true)
        }
    }
}
