// inotify and epoll exist on Linux alone. Elsewhere the build stops here, with one message,
// rather than on every kernel call the library makes.
#if !os(Linux)
    #error("DirectoryWatcher is for Linux only: it is built on inotify and epoll, which this system does not have")
#endif
