// libpinsight_fd_guard.so: keeps LTTng-UST's descriptors open when the traced
// program closes descriptors it does not own ("close every descriptor above
// 2": subprocess's close_fds, a preexec_fn, multiprocessing's workers,
// os.closerange, daemonizing code). LTTng-UST asserts when it later finds its
// shared-memory or socket descriptors closed, and aborts the program
// (counter/shm.c, ringbuffer/shm.c); liblttng-ust-fd.so, its own answer,
// covers close() and fclose() only, not close_range(2) or closefrom(3), which
// CPython uses.
//
// Every descriptor LTTng-UST opens is close-on-exec: nothing of ours reaches
// an exec'd program. Where LTTng-UST is not loaded (a child that is not a
// traced Python), LTTng-UST's tracker tracks nothing and the calls close as
// libc's would. `pinsight-python trace` preloads this library (LD_PRELOAD).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<linux/close_range.h>)
#include <linux/close_range.h>
#endif
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define EXPORT __attribute__((visibility("default")))

typedef int (*close_fn)(int);
typedef int (*fclose_fn)(FILE *);
typedef int (*close_range_fn)(unsigned int, unsigned int, int);
typedef void (*closefrom_fn)(int);

// LTTng-UST's descriptor tracker (liblttng-ust-common, linked: as liblttng-ust-fd.so
// is). Declared here: lttng-ust installs no header for it.
int lttng_ust_safe_close_fd(int fd, int (*close_cb)(int fd));
int lttng_ust_safe_fclose_stream(FILE *stream, int (*fclose_cb)(FILE *stream));
int lttng_ust_safe_closefrom_fd(int lowfd, int (*close_cb)(int fd));

// libc's, found once before the program runs: dlsym takes the loader's lock, which a
// thread in dlopen may hold while it waits for a thread of LTTng-UST's in close().
static close_fn real_close;
static fclose_fn real_fclose;
static close_range_fn real_close_range;
static closefrom_fn real_closefrom;

// Our constructor, or the first call (a library's constructor may close a
// descriptor before ours runs: the process is single-threaded then).
__attribute__((constructor)) static void find_libc(void) {
  if (real_close) return;
  real_fclose = (fclose_fn)dlsym(RTLD_NEXT, "fclose");
  real_close_range = (close_range_fn)dlsym(RTLD_NEXT, "close_range");
  real_closefrom = (closefrom_fn)dlsym(RTLD_NEXT, "closefrom");
  real_close = (close_fn)dlsym(RTLD_NEXT, "close");
}

EXPORT int close(int fd) {
  if (!real_close) find_libc();
  return lttng_ust_safe_close_fd(fd, real_close);
}

EXPORT int fclose(FILE *stream) {
  if (!real_close) find_libc();
  return lttng_ust_safe_fclose_stream(stream, real_fclose);
}

EXPORT void closefrom(int lowfd) {
  if (!real_close) find_libc();
  lttng_ust_safe_closefrom_fd(lowfd, real_close);
}

EXPORT int close_range(unsigned int first, unsigned int last, int flags) {
  if (!real_close) find_libc();
  // Marking descriptors close-on-exec leaves LTTng-UST's as they are (they are).
  if ((flags & CLOSE_RANGE_CLOEXEC) || first > last || real_close_range == NULL) {
    if (real_close_range) return real_close_range(first, last, flags);
    errno = ENOSYS;
    return -1;
  }
  if (flags != 0 && unshare(CLONE_FILES) != 0) return -1;  // CLOSE_RANGE_UNSHARE
  int saved_errno = errno;
  long open_max = sysconf(_SC_OPEN_MAX);
  if (open_max > 0 && (long)last >= open_max - 1) {
    lttng_ust_safe_closefrom_fd((int)first, real_close);
  } else {
    for (unsigned int fd = first; fd <= last; fd++) lttng_ust_safe_close_fd((int)fd, real_close);
  }
  errno = saved_errno;
  return 0;
}
