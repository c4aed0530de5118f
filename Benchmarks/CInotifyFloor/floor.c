#define _GNU_SOURCE
#include "CInotifyFloor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const uint32_t cif_directory_mask = IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM |
                                    IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF;

struct cif_floor {
    int inotify_fd;  // or the fanotify group's, for a floor opened with cif_floor_open_fanotify
    int epoll_fd;
    char **paths;  // indexed by watch descriptor (the kernel hands them out from 1, in order)
    size_t capacity;
    // A fanotify floor: its one directory's path, and its file handle (type, then bytes), which
    // a record's directory handle is compared with.
    int fanotify;
    char *directory;
    int handle_type;
    unsigned int handle_bytes;
    unsigned char handle[MAX_HANDLE_SZ];
};

enum { TOKEN_INOTIFY = 1, TOKEN_CONTROL = 2, READ_BUFFER_SIZE = 64 * 1024 };

cif_floor *cif_floor_open(void) {
    cif_floor *floor = calloc(1, sizeof *floor);
    if (!floor) return NULL;
    floor->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    floor->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event event = {.events = EPOLLIN, .data.u64 = TOKEN_INOTIFY};
    if (floor->inotify_fd < 0 || floor->epoll_fd < 0 ||
        epoll_ctl(floor->epoll_fd, EPOLL_CTL_ADD, floor->inotify_fd, &event) < 0) {
        int saved = errno;
        cif_floor_close(floor);
        errno = saved;
        return NULL;
    }
    return floor;
}

#ifndef FAN_REPORT_TARGET_FID
#define FAN_REPORT_TARGET_FID 0x00001000
#endif
#ifndef FAN_RENAME
#define FAN_RENAME 0x10000000
#endif

cif_floor *cif_floor_open_fanotify(const char *directory) {
    cif_floor *floor = calloc(1, sizeof *floor);
    if (!floor) return NULL;
    floor->fanotify = 1;
    floor->epoll_fd = -1;
    // The library's group and mark (cdw_fanotify_init, FanotifyTranslation.baseMask): records
    // name their directory by handle and the entry by name, and the object by its own handle.
    unsigned int flags = FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_DFID_NAME | FAN_REPORT_FID |
                         FAN_UNLIMITED_QUEUE;
    floor->inotify_fd = fanotify_init(flags | FAN_REPORT_TARGET_FID, O_RDONLY | O_LARGEFILE);
    if (floor->inotify_fd < 0 && errno == EINVAL) floor->inotify_fd = fanotify_init(flags, O_RDONLY | O_LARGEFILE);
    struct {
        struct file_handle header;
        unsigned char bytes[MAX_HANDLE_SZ];
    } handle = {.header.handle_bytes = MAX_HANDLE_SZ};
    int mount = 0;
    uint64_t mask = FAN_CREATE | FAN_DELETE | FAN_MODIFY | FAN_ATTRIB | FAN_DELETE_SELF | FAN_MOVE_SELF | FAN_RENAME |
                    FAN_ONDIR;
    struct epoll_event event = {.events = EPOLLIN, .data.u64 = TOKEN_INOTIFY};
    if (floor->inotify_fd < 0 || !(floor->directory = strdup(directory)) ||
        name_to_handle_at(AT_FDCWD, directory, &handle.header, &mount, 0) < 0 ||
        fanotify_mark(floor->inotify_fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, mask, AT_FDCWD, directory) < 0 ||
        (floor->epoll_fd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
        epoll_ctl(floor->epoll_fd, EPOLL_CTL_ADD, floor->inotify_fd, &event) < 0) {
        int saved = errno;
        cif_floor_close(floor);
        errno = saved;
        return NULL;
    }
    floor->handle_type = handle.header.handle_type;
    floor->handle_bytes = handle.header.handle_bytes;
    memcpy(floor->handle, handle.header.f_handle, handle.header.handle_bytes);
    return floor;
}

static int remember(cif_floor *floor, int wd, const char *path) {
    if ((size_t)wd >= floor->capacity) {
        size_t capacity = floor->capacity ? floor->capacity : 64;
        while (capacity <= (size_t)wd) capacity *= 2;
        char **grown = realloc(floor->paths, capacity * sizeof *grown);
        if (!grown) return -1;
        memset(grown + floor->capacity, 0, (capacity - floor->capacity) * sizeof *grown);
        floor->paths = grown;
        floor->capacity = capacity;
    }
    if (floor->paths[wd]) return wd;  // the same directory again: the kernel reuses its descriptor
    floor->paths[wd] = strdup(path);
    return floor->paths[wd] ? wd : -1;
}

int cif_floor_add(cif_floor *floor, const char *directory) {
    return cif_floor_add_mask(floor, directory, cif_directory_mask);
}

int cif_floor_add_mask(cif_floor *floor, const char *directory, uint32_t mask) {
    int wd = inotify_add_watch(floor->inotify_fd, directory, mask | IN_ONLYDIR | IN_EXCL_UNLINK);
    if (wd < 0) return -1;
    return remember(floor, wd, directory);
}

// Depth first, one path buffer extended and cut back in place; `length` is strlen(path).
static long add_tree(cif_floor *floor, char *path, size_t length) {
    if (cif_floor_add(floor, path) < 0) return -1;
    DIR *directory = opendir(path);
    if (!directory) return -1;
    long count = 1;
    struct dirent *entry;
    while ((entry = readdir(directory))) {
        const char *name = entry->d_name;
        if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
        size_t nameLength = strlen(name);
        if (length + 1 + nameLength >= PATH_MAX) continue;
        path[length] = '/';
        memcpy(path + length + 1, name, nameLength + 1);
        int isDirectory = entry->d_type == DT_DIR;
        if (entry->d_type == DT_UNKNOWN) {  // some file systems do not fill d_type
            struct stat status;
            isDirectory = lstat(path, &status) == 0 && S_ISDIR(status.st_mode);
        }
        if (isDirectory) {
            long below = add_tree(floor, path, length + 1 + nameLength);
            if (below < 0) {
                int saved = errno;
                closedir(directory);
                errno = saved;
                return -1;
            }
            count += below;
        }
        path[length] = 0;
    }
    closedir(directory);
    return count;
}

long cif_floor_add_tree(cif_floor *floor, const char *root) {
    char path[PATH_MAX];
    size_t length = strlen(root);
    if (length >= PATH_MAX) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(path, root, length + 1);
    return add_tree(floor, path, length);
}

static uint64_t monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

// With `report_fd` >= 0, writes the arrival time of the record just read there. -1 on error.
static int report_arrival(int report_fd) {
    if (report_fd < 0) return 0;
    uint64_t now = monotonic_ns();
    return write(report_fd, &now, sizeof now) == sizeof now ? 0 : -1;
}

// The per-record work: count it, rebuild the path it names (as any watcher that reports paths
// must; `sink` keeps the compiler from dropping that work), and report its arrival time.
static int process(const cif_floor *floor, const char *buffer, size_t length, int report_fd, cif_counts *counts,
                   volatile size_t *sink) {
    char path[PATH_MAX + NAME_MAX + 2];
    for (size_t offset = 0; offset + sizeof(struct inotify_event) <= length;) {
        struct inotify_event header;
        memcpy(&header, buffer + offset, sizeof header);
        const char *name = buffer + offset + sizeof header;
        offset += sizeof header + header.len;
        if (offset > length) break;
        counts->events++;
        if (header.mask & IN_Q_OVERFLOW) counts->overflows++;
        if (header.mask & IN_CREATE) counts->created++;
        if (header.wd > 0 && (size_t)header.wd < floor->capacity && floor->paths[header.wd]) {
            size_t directoryLength = strlen(floor->paths[header.wd]);
            size_t nameLength = header.len ? strnlen(name, header.len) : 0;
            memcpy(path, floor->paths[header.wd], directoryLength);
            path[directoryLength] = '/';
            memcpy(path + directoryLength + 1, name, nameLength);
            path[directoryLength + 1 + nameLength] = 0;
            *sink += directoryLength + nameLength;
        }
        if (report_arrival(report_fd) < 0) return -1;
    }
    return 0;
}

// The same for a fanotify floor's records: a record whose directory is not the watched one
// (the mark covers the whole file system) is counted as read and dropped.
static int process_fanotify(const cif_floor *floor, const char *buffer, size_t length, int report_fd,
                            cif_counts *counts, volatile size_t *sink) {
    char path[PATH_MAX + NAME_MAX + 2];
    size_t directoryLength = strlen(floor->directory);
    memcpy(path, floor->directory, directoryLength);
    path[directoryLength] = '/';
    for (size_t offset = 0; offset + sizeof(struct fanotify_event_metadata) <= length;) {
        struct fanotify_event_metadata header;
        memcpy(&header, buffer + offset, sizeof header);
        if (header.event_len < sizeof header || offset + header.event_len > length) break;
        const char *end = buffer + offset + header.event_len;
        const char *info = buffer + offset + header.metadata_len;
        offset += header.event_len;
        counts->events++;
        if (header.mask & FAN_Q_OVERFLOW) {
            counts->overflows++;
            continue;
        }
        // The record's directory and name: its first DFID_NAME information record.
        const char *name = NULL;
        int inside = 0;
        while (info + sizeof(struct fanotify_event_info_header) <= end) {
            struct fanotify_event_info_header part;
            memcpy(&part, info, sizeof part);
            if (part.len < sizeof part || info + part.len > end) break;
            if (part.info_type == FAN_EVENT_INFO_TYPE_DFID_NAME) {
                const char *handle = info + sizeof(struct fanotify_event_info_fid);
                struct file_handle fixed;
                memcpy(&fixed, handle, sizeof fixed);
                inside = fixed.handle_type == floor->handle_type && fixed.handle_bytes == floor->handle_bytes &&
                         memcmp(handle + sizeof fixed, floor->handle, floor->handle_bytes) == 0;
                name = handle + sizeof fixed + fixed.handle_bytes;
                break;
            }
            info += part.len;
        }
        if (!inside) continue;
        if (header.mask & FAN_CREATE) counts->created++;
        size_t nameLength = strnlen(name, (size_t)(end - name));
        memcpy(path + directoryLength + 1, name, nameLength);
        path[directoryLength + 1 + nameLength] = 0;
        *sink += directoryLength + nameLength;
        if (report_arrival(report_fd) < 0) return -1;
    }
    return 0;
}

// One read into `buffer`: its length, 0 when the queue is empty, -1 on error.
static ssize_t read_some(const cif_floor *floor, char *buffer) {
    for (;;) {
        ssize_t count = read(floor->inotify_fd, buffer, READ_BUFFER_SIZE);
        if (count >= 0) return count;
        if (errno == EINTR) continue;
        return errno == EAGAIN ? 0 : -1;
    }
}

// Reads and processes until the queue is empty.
static int drain(cif_floor *floor, char *buffer, int report_fd, cif_counts *counts, volatile size_t *sink) {
    for (;;) {
        ssize_t count = read_some(floor, buffer);
        if (count <= 0) return (int)count;
        int result = floor->fanotify ? process_fanotify(floor, buffer, (size_t)count, report_fd, counts, sink)
                                     : process(floor, buffer, (size_t)count, report_fd, counts, sink);
        if (result < 0) return -1;
    }
}

// The hand-off: the reading thread appends each read's bytes to `pending` and wakes the delivery
// thread if it was idle; the delivery thread swaps buffers and does the per-record work.
struct handoff {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    char *pending;  // under lock
    size_t length, capacity;
    int done;
    const cif_floor *floor;  // delivery thread only, from here on
    int report_fd;
    cif_counts counts;
    int result;
};

static void *deliver(void *argument) {
    struct handoff *handoff = argument;
    char *spare = NULL;
    size_t spareCapacity = 0;
    volatile size_t sink = 0;
    pthread_mutex_lock(&handoff->lock);
    for (;;) {
        while (handoff->length == 0 && !handoff->done) pthread_cond_wait(&handoff->wake, &handoff->lock);
        if (handoff->length == 0) break;
        char *batch = handoff->pending;
        size_t length = handoff->length, capacity = handoff->capacity;
        handoff->pending = spare;
        handoff->capacity = spareCapacity;
        handoff->length = 0;
        pthread_mutex_unlock(&handoff->lock);
        if (handoff->result == 0 &&
            (handoff->floor->fanotify
                 ? process_fanotify(handoff->floor, batch, length, handoff->report_fd, &handoff->counts, &sink)
                 : process(handoff->floor, batch, length, handoff->report_fd, &handoff->counts, &sink)) < 0) {
            handoff->result = -1;
        }
        spare = batch;
        spareCapacity = capacity;
        pthread_mutex_lock(&handoff->lock);
    }
    pthread_mutex_unlock(&handoff->lock);
    free(spare);
    return NULL;
}

static int hand_off(struct handoff *handoff, const char *bytes, size_t count) {
    pthread_mutex_lock(&handoff->lock);
    if (handoff->length + count > handoff->capacity) {
        size_t capacity = handoff->capacity ? handoff->capacity : READ_BUFFER_SIZE;
        while (capacity < handoff->length + count) capacity *= 2;
        char *grown = realloc(handoff->pending, capacity);
        if (!grown) {
            pthread_mutex_unlock(&handoff->lock);
            return -1;
        }
        handoff->pending = grown;
        handoff->capacity = capacity;
    }
    memcpy(handoff->pending + handoff->length, bytes, count);
    int wasIdle = handoff->length == 0;
    handoff->length += count;
    pthread_mutex_unlock(&handoff->lock);
    if (wasIdle) pthread_cond_signal(&handoff->wake);
    return 0;
}

// Reads until the queue is empty, handing each read to the delivery thread.
static int drain_to(cif_floor *floor, char *buffer, struct handoff *handoff) {
    for (;;) {
        ssize_t count = read_some(floor, buffer);
        if (count <= 0) return (int)count;
        if (hand_off(handoff, buffer, (size_t)count) < 0) return -1;
    }
}

int cif_floor_run(cif_floor *floor, int control_fd, int report_fd, int hand_off_to_thread, cif_counts *counts) {
    struct epoll_event event = {.events = EPOLLIN, .data.u64 = TOKEN_CONTROL};
    if (epoll_ctl(floor->epoll_fd, EPOLL_CTL_ADD, control_fd, &event) < 0) return -1;
    char *buffer = malloc(READ_BUFFER_SIZE);
    if (!buffer) return -1;
    struct handoff handoff = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER,
                              .floor = floor, .report_fd = report_fd};
    pthread_t thread;
    if (hand_off_to_thread && (errno = pthread_create(&thread, NULL, deliver, &handoff)) != 0) {
        free(buffer);
        return -1;
    }
    volatile size_t sink = 0;
    int result = 0;
    for (int running = 1; running && result == 0;) {
        struct epoll_event ready[4];
        int count = epoll_wait(floor->epoll_fd, ready, 4, -1);
        if (count < 0) {
            if (errno == EINTR) continue;
            result = -1;
            break;
        }
        for (int index = 0; index < count && result == 0; index++) {
            int endOfInput = 0;
            if (ready[index].data.u64 == TOKEN_CONTROL) {
                char bytes[64];
                ssize_t got = read(control_fd, bytes, sizeof bytes);
                if (got < 0 && errno != EINTR && errno != EAGAIN) result = -1;
                // Everything the controller did before closing its end is queued by now.
                endOfInput = got == 0;
                if (!endOfInput) continue;
            }
            result = hand_off_to_thread ? drain_to(floor, buffer, &handoff)
                                        : drain(floor, buffer, report_fd, counts, &sink);
            if (endOfInput) running = 0;
        }
    }
    int saved = errno;
    if (hand_off_to_thread) {
        pthread_mutex_lock(&handoff.lock);
        handoff.done = 1;
        pthread_mutex_unlock(&handoff.lock);
        pthread_cond_signal(&handoff.wake);
        pthread_join(thread, NULL);
        free(handoff.pending);
        *counts = handoff.counts;
        if (result == 0) result = handoff.result;
    }
    free(buffer);
    errno = saved;
    return result;
}

void cif_floor_close(cif_floor *floor) {
    if (!floor) return;
    if (floor->inotify_fd >= 0) close(floor->inotify_fd);
    if (floor->epoll_fd >= 0) close(floor->epoll_fd);
    for (size_t wd = 0; wd < floor->capacity; wd++) free(floor->paths[wd]);
    free(floor->paths);
    free(floor->directory);
    free(floor);
}

struct cif_snapshot_entry {
    char *name;
    uint64_t inode;
    int64_t size;
    int64_t modified_ns;
    uint32_t mode;
};

struct cif_snapshot {
    struct cif_snapshot_entry *entries;
    size_t count;
};

cif_snapshot *cif_snapshot_take(const char *path) {
    DIR *directory = opendir(path);
    if (!directory) return NULL;
    cif_snapshot *snapshot = calloc(1, sizeof *snapshot);
    size_t capacity = 0;
    struct dirent *entry;
    while (snapshot && (entry = readdir(directory))) {
        const char *name = entry->d_name;
        if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
        struct stat status;
        if (fstatat(dirfd(directory), name, &status, AT_SYMLINK_NOFOLLOW) < 0) continue;  // gone meanwhile
        if (snapshot->count == capacity) {
            capacity = capacity ? capacity * 2 : 64;
            struct cif_snapshot_entry *grown = realloc(snapshot->entries, capacity * sizeof *grown);
            if (!grown) {
                cif_snapshot_free(snapshot);
                snapshot = NULL;
                break;
            }
            snapshot->entries = grown;
        }
        struct cif_snapshot_entry *slot = &snapshot->entries[snapshot->count++];
        slot->name = strdup(name);
        slot->inode = status.st_ino;
        slot->size = status.st_size;
        slot->modified_ns = (int64_t)status.st_mtim.tv_sec * 1000000000 + status.st_mtim.tv_nsec;
        slot->mode = status.st_mode;
    }
    int saved = errno;
    closedir(directory);
    errno = saved;
    return snapshot;
}

size_t cif_snapshot_count(const cif_snapshot *snapshot) { return snapshot->count; }

void cif_snapshot_free(cif_snapshot *snapshot) {
    if (!snapshot) return;
    for (size_t index = 0; index < snapshot->count; index++) free(snapshot->entries[index].name);
    free(snapshot->entries);
    free(snapshot);
}
