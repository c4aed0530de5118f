// dirwatch: watch directories from a shell. All of it lives in DirWatchCLI, where it is tested.
import DirWatchCLI

DirWatch.main(CommandLine.arguments)
