#ifndef C_DIRECTORY_WATCHER_SHIMS_H
#define C_DIRECTORY_WATCHER_SHIMS_H

// inotify and epoll exist on Linux alone: elsewhere, one clear error instead of one per header.
#if !defined(__linux__)
#error "DirectoryWatcher is for Linux only: it is built on inotify and epoll, which this system does not have"
#else

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/types.h>

// `struct epoll_event` is packed on x86_64; these helpers keep its layout out of Swift.

/// epoll_ctl with the event's data set to `token`.
int cdw_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t token);

/// epoll_wait that writes each ready event's token and event bits into parallel arrays.
/// Waits up to `timeout_ns` nanoseconds (negative: for ever) with epoll_pwait2, which takes its
/// timeout to the nanosecond; where the kernel lacks it (before 5.11), with epoll_wait and the
/// timeout rounded up to a millisecond.
int cdw_epoll_wait(int epfd, uint64_t *tokens, uint32_t *events, int maxevents, int64_t timeout_ns);

/// read(2) and write(2) as bare system calls. glibc's wrappers are cancellation points, and
/// enable and disable cancellation around each call, which costs more than the call's own entry;
/// the library never cancels a thread, and a wake-up makes a read and a write.
ssize_t cdw_read(int fd, void *buffer, size_t count);
ssize_t cdw_write(int fd, const void *buffer, size_t count);

/// Asks the processor to bring the cache line at `address` in, for a read soon; no effect on
/// what the program computes (no fault, whatever the address). Inline, so Swift compiles it in
/// place: the router asks for each event's slot of its directory's table before it routes the
/// events of a read, so that their cache misses overlap.
static inline void cdw_prefetch(const void *address) { __builtin_prefetch(address, 0, 3); }

/// memfd_create(name, MFD_CLOEXEC); declared here because glibc hides it behind _GNU_SOURCE.
int cdw_memfd_create(const char *name);
/// Names the calling thread, for debuggers and `top -H` (pthread_setname_np, also _GNU_SOURCE).
void cdw_set_thread_name(const char *name);
/// The calling thread's callback depth: above zero while the library runs a caller's code on it
/// (a delivery, a barrier completion) and for the whole life of a loop thread. A C thread-local,
/// since Swift has none; each thread sees its own.
int cdw_callback_depth(void);
/// Adds `delta` (1 on entry, -1 on exit) to the calling thread's callback depth.
void cdw_callback_depth_add(int delta);
/// The calling thread's view of its loop's leadership phase (see EventLoop/Leadership.swift): the
/// phase it stored on entering a callback as leader, or UINT64_MAX once it was deposed. Per thread,
/// so a deposed leader can never act on the phase its successor stored.
uint64_t cdw_leader_phase(void);
void cdw_set_leader_phase(uint64_t phase);
/// pthread_create for a library thread: the thread starts with every signal blocked, so the
/// process's signals go to the app's threads (where a signal handler, a sigwait or a signalfd
/// expects them), never to a loop thread that would leave them pending or run a handler in the
/// middle of a callback. Returns pthread_create's result.
int cdw_thread_create(pthread_t *thread, void *(*body)(void *), void *argument);
/// What a directory listing keeps of one entry: statx's fields, in a layout Swift can import
/// (the `struct statx` declaration needs _GNU_SOURCE).
typedef struct {
    uint32_t mask;        // statx's stx_mask: which fields below are filled in
    uint32_t mode;        // type and permission bits
    uint32_t uid;
    uint32_t gid;
    uint64_t device;      // stx_dev_major and stx_dev_minor, as makedev combines them
    uint64_t inode;
    int64_t size;
    int64_t modified_seconds;
    uint32_t modified_nanoseconds;
    uint32_t changed_nanoseconds;
    int64_t changed_seconds;
    int64_t born_seconds; // 0 with born_nanoseconds when the file system keeps no birth time
    uint32_t born_nanoseconds;
} cdw_entry_status;

/// statx(directory, name, AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, basic stats and birth
/// time) into `status`. Returns 0, or -1 with errno set.
int cdw_entry_status_at(int directory, const char *name, cdw_entry_status *status);

// The cores this process may run on (its affinity mask's), at least 1.
int cdw_usable_cores(void);

// CRC-32C (Castagnoli) of `length` bytes, continuing `crc` (0 to begin): the saved state's
// checksum. SSE4.2's crc32 instruction where the processor has it, else slicing by 8.
uint32_t cdw_crc32c(uint32_t crc, const void *bytes, size_t length);
// The same by the portable path only, whatever the processor has: for tests to compare.
uint32_t cdw_crc32c_portable(uint32_t crc, const void *bytes, size_t length);

/// The file system type of `path` (statfs's f_type, the kernel's magic number, as an unsigned
/// 32-bit value), or -1 with errno set.
int64_t cdw_file_system_type(const char *path);
/// getdents64(fd, buffer, count): the next linux_dirent64 records of an open directory; 0 at the
/// end, -1 with errno set.
long cdw_getdents64(int fd, void *buffer, unsigned long count);
/// open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), with O_NOFOLLOW when `no_follow` is not 0 (a
/// symbolic link is then refused with ELOOP); -1 with errno set.
int cdw_open_directory(const char *path, int no_follow);
/// Options of cdw_open_directory_at.
#define CDW_OPEN_PATH_ONLY 1 // O_PATH instead of O_RDONLY: names the directory, reads nothing
#define CDW_OPEN_NO_FOLLOW 2 // O_NOFOLLOW
/// openat(directory, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) with the options above (O_PATH is
/// hidden behind _GNU_SOURCE); -1 with errno set.
int cdw_open_directory_at(int directory, const char *path, int options);
/// The process environment (`environ`), which Swift 6 cannot read as a global variable.
char *const *cdw_environ(void);

// fanotify, for a tree on one file system in one mark (Backends/Fanotify): the constants and
// calls glibc declares only in <sys/fanotify.h> and behind _GNU_SOURCE.

/// fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_DFID_NAME |
/// FAN_REPORT_FID | FAN_UNLIMITED_QUEUE | FAN_REPORT_TARGET_FID, O_RDONLY | O_LARGEFILE)
/// (without the last before 5.17): events that name the parent directory's file handle, the
/// entry's name and the entry's own handle, in a queue that events elsewhere on the file system
/// cannot overflow; -1 with errno set (EINVAL before 5.9, EPERM without CAP_SYS_ADMIN).
int cdw_fanotify_init(void);
/// fanotify_mark(fd, FAN_MARK_FILESYSTEM | (add ? FAN_MARK_ADD : FAN_MARK_REMOVE), mask,
/// AT_FDCWD, path): one mark for the whole file system that holds `path`.
int cdw_fanotify_mark_filesystem(int fd, int add, uint64_t mask, const char *path);
/// The bits of fanotify's masks this library asks for or reads (their values, from the kernel's
/// uapi header, are inotify's for the shared ones).
#define CDW_FAN_RENAME 0x10000000ULL
#define CDW_FAN_ONDIR 0x40000000ULL
#define CDW_FAN_Q_OVERFLOW 0x4000ULL
/// name_to_handle_at(directory, name, handle, &mount_id, flags) into `buffer` (capacity bytes):
/// writes the handle's type and length and its bytes; `name` NULL: the handle of `directory`
/// itself (AT_EMPTY_PATH). Returns 0, or -1 with errno set (EOPNOTSUPP: the file system has none).
int cdw_name_to_handle(int directory, const char *name, int32_t *type, uint8_t *buffer, uint32_t *length);
/// open_by_handle_at(mount_fd, handle, O_PATH | O_CLOEXEC): a descriptor naming the object of
/// the handle (type and bytes); -1 with errno set (ESTALE: it is gone). Needs CAP_DAC_READ_SEARCH.
int cdw_open_by_handle(int mount_fd, int32_t type, const uint8_t *bytes, uint32_t length);
/// fstatfs(fd)'s f_fsid, the 8 bytes fanotify's records name the file system by; 0 or -1.
int cdw_file_system_id(int fd, uint8_t *id);

/// The commit `dirwatch` was built from: the string literal of the DIRWATCH_COMMIT macro, passed
/// with `-Xcc -DDIRWATCH_COMMIT='"abc123"'` (Scripts/install does); "" when the build names none.
const char *cdw_build_commit(void);

/// ioctl(fd, FIONREAD): the bytes written into the pipe `fd` (either end) that its reader has not
/// read yet; -1 with errno set (ENOTTY: not a pipe or a socket).
int cdw_unread_bytes(int fd);

/// fcntl(fd, F_SETPIPE_SZ) to one page: the pipe then holds one buffer, so that its writing end
/// polls writable (POLLOUT) only once the reader has read everything. The new size, or -1 with
/// errno set (EBUSY: it holds more than a page now).
int cdw_pipe_hold_one_buffer(int fd);

/// prctl(PR_SET_CHILD_SUBREAPER): the calling process's orphaned descendants (a double fork's
/// daemon, a child of a `setsid` grandchild whose parent ended) become its children, not init's.
/// 0, or -1 with errno set.
int cdw_become_child_subreaper(void);

/// Waits until a child of the calling process has ended, without reaping it (WNOWAIT): its pid,
/// or -1 with errno set (ECHILD: it has no child).
pid_t cdw_wait_for_a_child(void);

/// Whether the calling process has a child, running or ended and not yet reaped.
int cdw_has_children(void);

/// O_NOATIME, a GNU flag the Glibc module does not export.
int cdw_open_no_access_time(void);

/// mallopt(M_MMAP_THRESHOLD, bytes), which the Glibc module does not export (malloc.h): blocks
/// of at least `bytes` are mapped on their own and unmapped when freed, and the threshold no
/// longer rises with the blocks freed. 1 on success, 0 on failure.
int cdw_set_mmap_threshold(int bytes);

/// The bytes free in malloc's heaps, their tops included (mallinfo2's fordblks): a request
/// larger than this cannot be served from them.
size_t cdw_heap_free_bytes(void);

/// Whether `block`, which malloc returned, has pages of its own: glibc marks such a block in the
/// size word just before it (IS_MMAPPED, 0x2), the bit its own free reads.
bool cdw_block_is_mapped(const void *block);

/// A mutex with a condition, in one 32-bit word for each (futexes): the library's `Lock`. An
/// uncontended lock and unlock are one atomic instruction each, where a `pthread_mutex_t` costs
/// about fifty instructions a pair in glibc (a wake-up takes seven locks). Every hand-over goes
/// through an atomic exchange in user space, never the kernel's (unlike a priority-inheriting
/// futex, which ThreadSanitizer cannot see): the kernel only puts threads to sleep and wakes them.
/// Zero-initialized is unlocked.
typedef struct {
    uint32_t state;     // 0 free, 1 held, 2 held and a thread may be asleep waiting for it
    uint32_t sequence;  // the condition's: bumped by each broadcast that finds a waiter
    uint32_t waiters;   // threads in cdw_lock_wait (under the lock)
    uint32_t reserved;
    uintptr_t owner;    // debug builds: the holder's pthread_self, to catch a thread relocking or unlocking another's
} cdw_lock;

void cdw_lock_acquire(cdw_lock *lock);
void cdw_lock_release(cdw_lock *lock);
/// Waits for a broadcast, at most `timeout_ns` nanoseconds (negative: no limit); call with the
/// lock held, which is released while waiting and held again on return. May return early: the
/// caller checks its condition again, as with pthread_cond_wait.
void cdw_lock_wait(cdw_lock *lock, int64_t timeout_ns);
/// Wakes every waiter; call with the lock held.
void cdw_lock_broadcast(cdw_lock *lock);

#endif // __linux__
#endif
