#define _GNU_SOURCE
// First: on a system other than Linux, its #error is the one message.
#include "CDirectoryWatcherShims.h"
#ifdef __linux__
#include <pthread.h>
#include <sched.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <time.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/fanotify.h>
#include <malloc.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#include <stdio.h>
#include <linux/futex.h>

int cdw_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t token) {
    struct epoll_event event = { .events = events, .data.u64 = token };
    return epoll_ctl(epfd, op, fd, &event);
}

ssize_t cdw_read(int fd, void *buffer, size_t count) {
    return syscall(SYS_read, fd, buffer, count);
}

ssize_t cdw_write(int fd, const void *buffer, size_t count) {
    return syscall(SYS_write, fd, buffer, count);
}

#ifdef SYS_epoll_pwait2
static _Atomic int pwait2_missing;
#endif

int cdw_epoll_wait(int epfd, uint64_t *tokens, uint32_t *events, int maxevents, int64_t timeout_ns) {
    struct epoll_event ready[16];
    if (maxevents > 16) maxevents = 16;
    int count = -1;
    int waited = 0;
#ifdef SYS_epoll_pwait2
    if (timeout_ns >= 0 && !pwait2_missing) {
        struct timespec timeout = {(time_t)(timeout_ns / 1000000000), (long)(timeout_ns % 1000000000)};
        count = (int)syscall(SYS_epoll_pwait2, epfd, ready, maxevents, &timeout, NULL, 0);
        if (count < 0 && errno == ENOSYS) {
            pwait2_missing = 1;
        } else {
            waited = 1;
        }
    }
#endif
    if (!waited) {
        int timeout_ms = timeout_ns < 0 ? -1 : (timeout_ns > (int64_t)INT32_MAX * 1000000 ? INT32_MAX : (int)((timeout_ns + 999999) / 1000000));
        // (epoll_pwait with no signal mask is epoll_wait, on every architecture, and without
        // glibc's cancellation bookkeeping: see cdw_read.)
        count = (int)syscall(SYS_epoll_pwait, epfd, ready, maxevents, timeout_ms, NULL, 0);
    }
    for (int i = 0; i < count; i++) {
        tokens[i] = ready[i].data.u64;
        events[i] = ready[i].events;
    }
    return count;
}

int cdw_memfd_create(const char *name) {
    return memfd_create(name, MFD_CLOEXEC);
}

void cdw_set_thread_name(const char *name) {
    pthread_setname_np(pthread_self(), name);
}

char *const *cdw_environ(void) {
    return environ;
}

static _Thread_local int callback_depth;

int cdw_callback_depth(void) {
    return callback_depth;
}

void cdw_callback_depth_add(int delta) {
    callback_depth += delta;
}

static _Thread_local uint64_t leader_phase;

uint64_t cdw_leader_phase(void) {
    return leader_phase;
}

void cdw_set_leader_phase(uint64_t phase) {
    leader_phase = phase;
}

int cdw_thread_create(pthread_t *thread, void *(*body)(void *), void *argument) {
    sigset_t all, previous;
    sigfillset(&all);
    // The new thread inherits the creating thread's mask; the creator gets its own back.
    int result = pthread_sigmask(SIG_SETMASK, &all, &previous);
    if (result != 0) return result;
    result = pthread_create(thread, NULL, body, argument);
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    return result;
}

int cdw_entry_status_at(int directory, const char *name, cdw_entry_status *status) {
    struct statx result;
    if (statx(directory, name, AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_BASIC_STATS | STATX_BTIME,
              &result) != 0) {
        return -1;
    }
    status->mask = result.stx_mask;
    status->mode = result.stx_mode;
    status->uid = result.stx_uid;
    status->gid = result.stx_gid;
    status->device = makedev(result.stx_dev_major, result.stx_dev_minor);
    status->inode = result.stx_ino;
    status->size = (int64_t)result.stx_size;
    status->modified_seconds = result.stx_mtime.tv_sec;
    status->modified_nanoseconds = result.stx_mtime.tv_nsec;
    status->changed_seconds = result.stx_ctime.tv_sec;
    status->changed_nanoseconds = result.stx_ctime.tv_nsec;
    int born = (result.stx_mask & STATX_BTIME) != 0;
    status->born_seconds = born ? result.stx_btime.tv_sec : 0;
    status->born_nanoseconds = born ? result.stx_btime.tv_nsec : 0;
    return 0;
}

long cdw_getdents64(int fd, void *buffer, unsigned long count) {
    return syscall(SYS_getdents64, fd, buffer, count);
}

int cdw_open_directory(const char *path, int no_follow) {
    return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (no_follow ? O_NOFOLLOW : 0));
}

int64_t cdw_file_system_type(const char *path) {
    struct statfs buffer;
    if (statfs(path, &buffer) != 0) return -1;
    // f_type is a signed word; the magic numbers are 32-bit patterns (CIFS's has the top bit set).
    return (int64_t)(uint32_t)buffer.f_type;
}

int cdw_open_directory_at(int directory, const char *path, int options) {
    int access = (options & CDW_OPEN_PATH_ONLY) ? O_PATH : O_RDONLY;
    return openat(directory, path, access | O_DIRECTORY | O_CLOEXEC | ((options & CDW_OPEN_NO_FOLLOW) ? O_NOFOLLOW : 0));
}
#ifndef FAN_REPORT_TARGET_FID
#define FAN_REPORT_TARGET_FID 0x00001000
#endif

int cdw_fanotify_init(void) {
    // FAN_UNLIMITED_QUEUE: the mark covers the whole file system, so a busy one elsewhere must
    // not overflow the queue a quiet tree shares with it. It needs CAP_SYS_ADMIN, which marking
    // a file system needs anyway.
    unsigned int flags = FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_DFID_NAME | FAN_REPORT_FID
        | FAN_UNLIMITED_QUEUE;
    // The entry's own handle with every event of a name (5.17): a new directory is known by it.
    int fd = fanotify_init(flags | FAN_REPORT_TARGET_FID, O_RDONLY | O_LARGEFILE);
    if (fd < 0 && errno == EINVAL) fd = fanotify_init(flags, O_RDONLY | O_LARGEFILE);
    return fd;
}

int cdw_fanotify_mark_filesystem(int fd, int add, uint64_t mask, const char *path) {
    return fanotify_mark(fd, FAN_MARK_FILESYSTEM | (add ? FAN_MARK_ADD : FAN_MARK_REMOVE), mask, AT_FDCWD, path);
}

int cdw_name_to_handle(int directory, const char *name, int32_t *type, uint8_t *buffer, uint32_t *length) {
    // MAX_HANDLE_SZ (128) bytes of handle after the header.
    union {
        struct file_handle handle;
        unsigned char bytes[sizeof(struct file_handle) + 128];
    } storage;
    storage.handle.handle_bytes = 128;
    int mount_id;
    if (name_to_handle_at(directory, name ? name : "", &storage.handle, &mount_id, name ? 0 : AT_EMPTY_PATH) != 0)
        return -1;
    if (storage.handle.handle_bytes > *length) {
        errno = EOVERFLOW;
        return -1;
    }
    *type = storage.handle.handle_type;
    *length = storage.handle.handle_bytes;
    memcpy(buffer, storage.handle.f_handle, storage.handle.handle_bytes);
    return 0;
}

int cdw_open_by_handle(int mount_fd, int32_t type, const uint8_t *bytes, uint32_t length) {
    if (length > 128) {
        errno = EINVAL;
        return -1;
    }
    union {
        struct file_handle handle;
        unsigned char bytes[sizeof(struct file_handle) + 128];
    } storage;
    storage.handle.handle_bytes = length;
    storage.handle.handle_type = type;
    memcpy(storage.handle.f_handle, bytes, length);
    return open_by_handle_at(mount_fd, &storage.handle, O_PATH | O_CLOEXEC);
}

int cdw_file_system_id(int fd, uint8_t *id) {
    struct statfs status;
    if (fstatfs(fd, &status) != 0) return -1;
    memcpy(id, &status.f_fsid, 8);
    return 0;
}

int cdw_usable_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    int count = CPU_COUNT(&set);
    return count > 0 ? count : 1;
}

// MARK: CRC-32C

// Slicing by 8: eight tables, so that eight bytes are folded in per step with eight lookups
// (a table a byte at a time costs a dependent lookup per byte, about 4x slower).
static uint32_t crc32c_tables[8][256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

static void crc32c_make_tables(void) {
    for (uint32_t index = 0; index < 256; index++) {
        uint32_t crc = index;
        for (int bit = 0; bit < 8; bit++) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
        crc32c_tables[0][index] = crc;
    }
    for (uint32_t index = 0; index < 256; index++) {
        for (int table = 1; table < 8; table++) {
            uint32_t previous = crc32c_tables[table - 1][index];
            crc32c_tables[table][index] = (previous >> 8) ^ crc32c_tables[0][previous & 0xFF];
        }
    }
}

uint32_t cdw_crc32c_portable(uint32_t crc, const void *bytes, size_t length) {
    pthread_once(&crc32c_once, crc32c_make_tables);
    const unsigned char *next = bytes;
    crc = ~crc;
    while (length > 0 && ((uintptr_t)next & 7) != 0) {
        crc = crc32c_tables[0][(crc ^ *next++) & 0xFF] ^ (crc >> 8);
        length--;
    }
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, next, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        word = __builtin_bswap64(word);
#endif
        word ^= crc;
        crc = crc32c_tables[7][word & 0xFF] ^ crc32c_tables[6][(word >> 8) & 0xFF]
            ^ crc32c_tables[5][(word >> 16) & 0xFF] ^ crc32c_tables[4][(word >> 24) & 0xFF]
            ^ crc32c_tables[3][(word >> 32) & 0xFF] ^ crc32c_tables[2][(word >> 40) & 0xFF]
            ^ crc32c_tables[1][(word >> 48) & 0xFF] ^ crc32c_tables[0][word >> 56];
        next += 8;
        length -= 8;
    }
    while (length-- > 0) crc = crc32c_tables[0][(crc ^ *next++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const void *bytes, size_t length) {
    const unsigned char *next = bytes;
    uint64_t value = ~crc;
    while (length > 0 && ((uintptr_t)next & 7) != 0) {
        value = __builtin_ia32_crc32qi((uint32_t)value, *next++);
        length--;
    }
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, next, 8);
        value = __builtin_ia32_crc32di(value, word);
        next += 8;
        length -= 8;
    }
    while (length-- > 0) value = __builtin_ia32_crc32qi((uint32_t)value, *next++);
    return ~(uint32_t)value;
}
#endif

uint32_t cdw_crc32c(uint32_t crc, const void *bytes, size_t length) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2")) return crc32c_sse42(crc, bytes, length);
#endif
    return cdw_crc32c_portable(crc, bytes, length);
}

const char *cdw_build_commit(void) {
#ifdef DIRWATCH_COMMIT
    return DIRWATCH_COMMIT;
#else
    return "";
#endif
}

int cdw_unread_bytes(int fd) {
    int unread = 0;
    return ioctl(fd, FIONREAD, &unread) == 0 ? unread : -1;
}

int cdw_become_child_subreaper(void) {
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

pid_t cdw_wait_for_a_child(void) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    return waitid(P_ALL, 0, &info, WEXITED | WNOWAIT) == 0 ? info.si_pid : -1;
}

int cdw_has_children(void) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    // WNOHANG: 0 when children are running (si_pid 0) or one has ended; ECHILD when none.
    return waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0 || errno != ECHILD;
}

int cdw_open_no_access_time(void) {
    return O_NOATIME;
}

int cdw_set_mmap_threshold(int bytes) {
    return mallopt(M_MMAP_THRESHOLD, bytes);
}

size_t cdw_heap_free_bytes(void) {
    return mallinfo2().fordblks;
}

bool cdw_block_is_mapped(const void *block) {
    return (((const size_t *)block)[-1] & 0x2) != 0;
}

int cdw_pipe_hold_one_buffer(int fd) {
    return fcntl(fd, F_SETPIPE_SZ, (int)sysconf(_SC_PAGESIZE));
}

// MARK: - Lock (Drepper, "Futexes Are Tricky", mutex 3; a sequence-counter condition)

static long futex(uint32_t *word, int op, uint32_t value, const struct timespec *timeout) {
    return syscall(SYS_futex, word, op, value, timeout, NULL, 0);
}

__attribute__((noinline, cold)) static void lock_misused(const char *what) {
    fprintf(stderr, "DirectoryWatcher: a lock was %s\n", what);
    abort();
}

// Debug builds know each lock's holder, to stop at a thread locking what it holds (which would
// otherwise sleep for ever) as an error-checking pthread mutex does. Release builds keep the
// fast paths to their one atomic instruction, and still stop at an unlock of a free lock.
#ifdef DEBUG
static void lock_taken(cdw_lock *lock) {
    __atomic_store_n(&lock->owner, (uintptr_t)pthread_self(), __ATOMIC_RELAXED);
}
static void lock_checked_before_sleep(cdw_lock *lock) {
    // Only the holder can have stored its own identity: anyone else reads another's, or 0.
    if (__atomic_load_n(&lock->owner, __ATOMIC_RELAXED) == (uintptr_t)pthread_self()) {
        lock_misused("locked again by the thread that holds it");
    }
}
static void lock_given_up(cdw_lock *lock) {
    if (__atomic_load_n(&lock->owner, __ATOMIC_RELAXED) != (uintptr_t)pthread_self()) {
        lock_misused("unlocked by a thread that does not hold it");
    }
    __atomic_store_n(&lock->owner, 0, __ATOMIC_RELAXED);
}
#else
static inline void lock_taken(cdw_lock *lock) { (void)lock; }
static inline void lock_checked_before_sleep(cdw_lock *lock) { (void)lock; }
static inline void lock_given_up(cdw_lock *lock) { (void)lock; }
#endif

// Takes the lock once the fast path found it held (`seen`, 1 or 2): marks it contended, so that
// its holder's release wakes a sleeper, and sleeps until an exchange finds it free.
__attribute__((noinline)) static void lock_contended(cdw_lock *lock, uint32_t seen) {
    lock_checked_before_sleep(lock);
    if (seen != 2) seen = __atomic_exchange_n(&lock->state, 2, __ATOMIC_ACQUIRE);
    while (seen != 0) {
        futex(&lock->state, FUTEX_WAIT_PRIVATE, 2, NULL);
        seen = __atomic_exchange_n(&lock->state, 2, __ATOMIC_ACQUIRE);
    }
    lock_taken(lock);
}

void cdw_lock_acquire(cdw_lock *lock) {
    uint32_t seen = 0;
    if (__builtin_expect(__atomic_compare_exchange_n(&lock->state, &seen, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED), 1)) {
        lock_taken(lock);
        return;
    }
    lock_contended(lock, seen);
}

__attribute__((noinline)) static void lock_wake(cdw_lock *lock, uint32_t was) {
    if (was == 0) lock_misused("unlocked while free");
    futex(&lock->state, FUTEX_WAKE_PRIVATE, 1, NULL);
}

void cdw_lock_release(cdw_lock *lock) {
    lock_given_up(lock);
    uint32_t was = __atomic_exchange_n(&lock->state, 0, __ATOMIC_RELEASE);
    if (__builtin_expect(was != 1, 0)) lock_wake(lock, was);
}

void cdw_lock_wait(cdw_lock *lock, int64_t timeout_ns) {
    // Read under the lock: a broadcast after the release below changes it, and the kernel then
    // refuses the sleep (its comparison and a wake are atomic with each other).
    uint32_t sequence = __atomic_load_n(&lock->sequence, __ATOMIC_RELAXED);
    lock->waiters += 1;
    cdw_lock_release(lock);
    struct timespec timeout = {(time_t)(timeout_ns / 1000000000), (long)(timeout_ns % 1000000000)};
    futex(&lock->sequence, FUTEX_WAIT_PRIVATE, sequence, timeout_ns < 0 ? NULL : &timeout);
    // Taken as contended: another waiter the same broadcast woke may be asleep on the lock.
    lock_contended(lock, 1);
    lock->waiters -= 1;
}

void cdw_lock_broadcast(cdw_lock *lock) {
    if (lock->waiters == 0) return;
    __atomic_fetch_add(&lock->sequence, 1, __ATOMIC_RELAXED);
    futex(&lock->sequence, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL);
}

#endif // __linux__
