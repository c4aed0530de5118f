#ifndef C_INOTIFY_FLOOR_H
#define C_INOTIFY_FLOOR_H

// The floor the benchmark compares the library against: the least a reader of inotify can do
// and still tell you which path changed. One inotify instance, one epoll set, one thread, a
// 64 KiB read buffer, records parsed by their `len` field, the path rebuilt from a table indexed
// by watch descriptor. No allocation per event, no thread hop, no queue (except in the hand-off
// variant of `cif_floor_run`, which exists to measure what a hop costs).

#include <stddef.h>
#include <stdint.h>

/// The events the library asks the kernel for on a watched directory (its `directoryWatch` mask),
/// so both sides make the kernel queue the same records.
extern const uint32_t cif_directory_mask;

/// What the floor received.
typedef struct {
    uint64_t events;     ///< records read, of any kind
    uint64_t created;    ///< IN_CREATE records
    uint64_t overflows;  ///< IN_Q_OVERFLOW records
} cif_counts;

typedef struct cif_floor cif_floor;

/// Opens an inotify instance (non-blocking, close-on-exec) and its epoll set. NULL with errno set.
cif_floor *cif_floor_open(void);

/// A fanotify floor of one directory: a fanotify group and mark as the library makes them for a
/// tree (`FAN_REPORT_DFID_NAME | FAN_REPORT_FID`, with `FAN_REPORT_TARGET_FID` where the kernel has
/// it, an unlimited queue; one `FAN_MARK_FILESYSTEM` mark with the library's events), and the
/// directory's file handle. `cif_floor_run` then reads its records: those whose directory handle
/// is the directory's are counted and their paths rebuilt, the others (the mark covers the whole
/// file system) counted as read and dropped. What the kernel's fanotify costs, beside the inotify
/// floor's. NULL with errno set (EPERM without CAP_SYS_ADMIN).
cif_floor *cif_floor_open_fanotify(const char *directory);

/// Watches one directory with `cif_directory_mask`. The watch descriptor, or -1 with errno set.
int cif_floor_add(cif_floor *floor, const char *directory);

/// Watches one directory for the events of `mask` alone (for example IN_CLOSE_WRITE: when a
/// writer closes a file, the floor of a settled watcher's latency). As `cif_floor_add`.
int cif_floor_add_mask(cif_floor *floor, const char *directory, uint32_t mask);

/// Watches `root` and every directory under it, the naive way: a depth-first readdir walk that
/// adds each directory as it is found, one `inotify_add_watch` per directory, its path kept in the
/// table. The number of directories watched, or -1 with errno set (the walk stops at the error).
long cif_floor_add_tree(cif_floor *floor, const char *root);

/// Reads events until `control_fd` reaches end of file, then reads what is still queued and
/// returns. With `report_fd` >= 0, writes each record's CLOCK_MONOTONIC arrival time (8 bytes,
/// nanoseconds) there, so another process can measure latency. 0, or -1 with errno set.
///
/// With `hand_off_to_thread`, the reading thread does not look at the records: it hands the bytes
/// of each read to a second thread (mutex, condition variable, woken only when idle), which does
/// the per-record work. That is the library's shape (an event-loop thread, a delivery queue)
/// without its code, so it measures what the hand-off itself costs.
int cif_floor_run(cif_floor *floor, int control_fd, int report_fd, int hand_off_to_thread, cif_counts *counts);

/// Closes the instance (the kernel removes its watches) and frees the table.
void cif_floor_close(cif_floor *floor);

/// A directory listing kept to compare against later: per entry its name, inode, size, mode and
/// modification time, the least a snapshot must hold to tell what changed between two listings.
typedef struct cif_snapshot cif_snapshot;

/// Lists `directory` into a snapshot. NULL with errno set.
cif_snapshot *cif_snapshot_take(const char *directory);
size_t cif_snapshot_count(const cif_snapshot *snapshot);
void cif_snapshot_free(cif_snapshot *snapshot);

#endif
