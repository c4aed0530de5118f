#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
#include "CDirectoryWatcherShims.h"

int cdw_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t token) {
    struct epoll_event event = { .events = events, .data.u64 = token };
    return epoll_ctl(epfd, op, fd, &event);
}

int cdw_epoll_wait(int epfd, uint64_t *tokens, uint32_t *events, int maxevents, int timeout) {
    struct epoll_event ready[16];
    if (maxevents > 16) maxevents = 16;
    int count = epoll_wait(epfd, ready, maxevents, timeout);
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
