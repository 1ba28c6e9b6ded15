/* LD_PRELOAD shim: moves CLOCK_REALTIME by STANDINGS_CLOCK_OFFSET_SECS seconds for the process
 * it is loaded into (the test binary and the redis-server it talks to), so CI can run the
 * clock-sensitive tests as if today were a year from now. libfaketime does the same but makes
 * redis-server's jemalloc abort at start; this shim only touches the wall clock, through the
 * raw syscall, and leaves monotonic clocks alone.
 *
 * With STANDINGS_CLOCK_OFFSET_FILE instead, the offset is the 8-byte native integer that file
 * holds, read on every call: a test moves a running server's clock forward day by day (the
 * server keeps its data, and expires keys as the days pass). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* The offset file, mapped once (NULL: none). Threads may race to map it; each maps the same
 * file, and the last mapping stored wins. */
static volatile const long long *offset_file(void) {
  static volatile const long long *mapped = NULL;
  static volatile int tried = 0;
  if (!tried) {
    const char *path = getenv("STANDINGS_CLOCK_OFFSET_FILE");
    if (path) {
      int fd = open(path, O_RDONLY);
      if (fd >= 0) {
        void *map = mmap(NULL, sizeof(long long), PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (map != MAP_FAILED) mapped = map;
      }
    }
    tried = 1;
  }
  return mapped;
}

static long offset_secs(void) {
  static long offset = -1;
  volatile const long long *file = offset_file();
  if (file) return (long)*file;
  if (offset == -1) {
    const char *text = getenv("STANDINGS_CLOCK_OFFSET_SECS");
    offset = text ? atol(text) : 0;
  }
  return offset;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
  long rc = syscall(SYS_clock_gettime, clock, ts);
  if (rc == 0 && ts && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) ts->tv_sec += offset_secs();
  return (int)rc;
}

int gettimeofday(struct timeval *tv, void *tz) {
  struct timespec ts;
  (void)tz;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
  if (tv) {
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
  }
  return 0;
}

time_t time(time_t *out) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (out) *out = ts.tv_sec;
  return ts.tv_sec;
}
