// I/O fault injector: fails the Nth call of one file operation on files under one directory, so the
// unchanged `skainet` binary can be tested on short writes, a full disk, failing fsync/close/rename/
// linkat (docs/reliability.md, "Fault injection"). Built only for the tests, as a shared library that
// is either LD_PRELOADed into a process (configured by the environment, below) or linked into a test
// binary (configured with skainet_iofault_configure, io_fault.h).
//
//   SKAINET_IOFAULT_DIR=/tmp/x        only descriptors opened on a path under it (or on it: O_TMPFILE,
//                                     the directory fsync) and renames/links into it are counted
//   SKAINET_IOFAULT_OP=write          write | short_write | fsync | close | rename | linkat
//   SKAINET_IOFAULT_N=3               the 3rd counted call of that operation fails (0: count only)
//   SKAINET_IOFAULT_ERRNO=ENOSPC      ENOSPC, EIO, EDQUOT, EROFS, EPERM or a number (default EIO)
//   SKAINET_IOFAULT_PERSIST=1         every later call of the operation fails too (a disk stays full)
//   SKAINET_IOFAULT_REPORT=/tmp/r     at exit: the counts of each operation and where the fault fired
//
// A short write writes half the bytes asked for and returns that count (what a signal or a pipe may
// do); it is not an error, so the writer must loop. A failing close really closes the descriptor
// first, as Linux does. Only calls made through the dynamic symbol table are seen (the program's own,
// libstdc++'s), not glibc's internal ones: that is where the engine does its file I/O.
#define _GNU_SOURCE
#include "io_fault.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

enum { kOpWrite, kOpFsync, kOpClose, kOpRename, kOpLinkat, kOps };
static const char* const kOpNames[kOps] = {"write", "fsync", "close", "rename", "linkat"};

enum { kMaxFd = 65536 };
// 0: not watched; 1: a file under the directory; 2: the directory itself (O_DIRECTORY).
static _Atomic unsigned char g_watched[kMaxFd];

static char g_dir[4096];
static size_t g_dir_len;
static int g_op = -1;
static int g_short;
static long g_n;
static int g_errno = EIO;
static int g_persist;
static char g_report[4096];
static atomic_long g_calls[kOps];
static atomic_int g_fired;
static atomic_int g_fired_on_dir;

typedef int (*open_fn)(const char*, int, ...);
typedef int (*openat_fn)(int, const char*, int, ...);
typedef ssize_t (*write_fn)(int, const void*, size_t);
typedef int (*fd_fn)(int);
typedef int (*rename_fn)(const char*, const char*);
typedef int (*renameat_fn)(int, const char*, int, const char*);
typedef int (*renameat2_fn)(int, const char*, int, const char*, unsigned);
typedef int (*linkat_fn)(int, const char*, int, const char*, int);

static void* real(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (f == NULL) {
    // Not write(): that is this library's own, which needs the real one.
    static const char msg[] = "io_fault: dlsym(RTLD_NEXT) found no libc function to forward to\n";
    (void)!syscall(SYS_write, 2, msg, sizeof msg - 1);
    abort();
  }
  return f;
}
// The next definition of `name` (libc's, or a sanitizer's interceptor), looked up once.
#define REAL(type, name)                                   \
  __extension__({                                          \
    static void* fn_;                                      \
    void* p_ = __atomic_load_n(&fn_, __ATOMIC_RELAXED);    \
    if (p_ == NULL) {                                      \
      p_ = real(#name);                                    \
      __atomic_store_n(&fn_, p_, __ATOMIC_RELAXED);        \
    }                                                      \
    (type)p_;                                              \
  })

static int parse_errno(const char* s) {
  static const struct { const char* name; int value; } kNames[] = {
      {"ENOSPC", ENOSPC}, {"EIO", EIO}, {"EDQUOT", EDQUOT}, {"EROFS", EROFS}, {"EPERM", EPERM}, {"EXDEV", EXDEV}};
  for (size_t i = 0; i < sizeof kNames / sizeof kNames[0]; ++i)
    if (strcmp(s, kNames[i].name) == 0) return kNames[i].value;
  const int v = atoi(s);
  return v > 0 ? v : EIO;
}

void skainet_iofault_configure(const char* dir, const char* op, long n, int err, int persist) {
  g_dir_len = 0;
  g_dir[0] = 0;
  if (dir != NULL && strlen(dir) < sizeof g_dir) {
    strcpy(g_dir, dir);
    g_dir_len = strlen(g_dir);
    while (g_dir_len > 1 && g_dir[g_dir_len - 1] == '/') g_dir[--g_dir_len] = 0;
  }
  g_op = -1;
  g_short = 0;
  if (op != NULL && strcmp(op, "short_write") == 0) {
    g_op = kOpWrite;
    g_short = 1;
  } else if (op != NULL) {
    for (int i = 0; i < kOps; ++i)
      if (strcmp(op, kOpNames[i]) == 0) g_op = i;
  }
  g_n = n;
  g_errno = err > 0 ? err : EIO;
  g_persist = persist;
  for (int i = 0; i < kOps; ++i) atomic_store(&g_calls[i], 0);
  atomic_store(&g_fired, 0);
  atomic_store(&g_fired_on_dir, 0);
}

long skainet_iofault_calls(const char* op) {
  for (int i = 0; i < kOps; ++i)
    if (strcmp(op, kOpNames[i]) == 0) return atomic_load(&g_calls[i]);
  return -1;
}

int skainet_iofault_fired(void) { return atomic_load(&g_fired); }
int skainet_iofault_fired_on_directory(void) { return atomic_load(&g_fired_on_dir); }

static void write_report(void) {
  if (g_report[0] == 0) return;
  char text[512];
  int len = 0;
  for (int i = 0; i < kOps; ++i)
    len += snprintf(text + len, sizeof text - (size_t)len, "%s %ld\n", kOpNames[i], atomic_load(&g_calls[i]));
  len += snprintf(text + len, sizeof text - (size_t)len, "fired %d\nfired_on_directory %d\n", atomic_load(&g_fired),
                  atomic_load(&g_fired_on_dir));
  const int fd = REAL(open_fn, open)(g_report, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)!REAL(write_fn, write)(fd, text, (size_t)len);
  REAL(fd_fn, close)(fd);
}

__attribute__((constructor)) static void configure_from_environment(void) {
  const char* dir = getenv("SKAINET_IOFAULT_DIR");
  if (dir == NULL) return;
  const char* op = getenv("SKAINET_IOFAULT_OP");
  const char* n = getenv("SKAINET_IOFAULT_N");
  const char* err = getenv("SKAINET_IOFAULT_ERRNO");
  const char* persist = getenv("SKAINET_IOFAULT_PERSIST");
  skainet_iofault_configure(dir, op, n ? atol(n) : 0, err ? parse_errno(err) : EIO, persist && strcmp(persist, "1") == 0);
  const char* report = getenv("SKAINET_IOFAULT_REPORT");
  if (report != NULL && strlen(report) < sizeof g_report) {
    strcpy(g_report, report);
    atexit(write_report);
  }
}

// Whether `path` (relative to `dirfd`) names the directory or something under it. Paths are compared
// as written (made absolute, not resolved): the tests give absolute paths without links.
static int under_dir(int dirfd, const char* path) {
  if (g_dir_len == 0 || path == NULL) return 0;
  char abs[8192];
  if (path[0] == '/') {
    if (strlen(path) >= sizeof abs) return 0;
    strcpy(abs, path);
  } else {
    size_t base;
    if (dirfd == AT_FDCWD) {
      if (getcwd(abs, sizeof abs / 2) == NULL) return 0;
      base = strlen(abs);
    } else {
      char proc[64];
      snprintf(proc, sizeof proc, "/proc/self/fd/%d", dirfd);
      const ssize_t r = readlink(proc, abs, sizeof abs / 2);
      if (r < 0) return 0;
      base = (size_t)r;
    }
    if (base + 1 + strlen(path) >= sizeof abs) return 0;
    abs[base] = '/';
    strcpy(abs + base + 1, path);
  }
  return strncmp(abs, g_dir, g_dir_len) == 0 && (abs[g_dir_len] == '/' || abs[g_dir_len] == 0);
}

static void note_open(int fd, int dirfd, const char* path, int flags) {
  // O_TMPFILE contains O_DIRECTORY's bit, but what it opens is a file.
  const int is_dir = (flags & O_DIRECTORY) && (flags & O_TMPFILE) != O_TMPFILE;
  if (fd >= 0 && fd < kMaxFd && under_dir(dirfd, path)) atomic_store(&g_watched[fd], is_dir ? 2 : 1);
}

// Counts a call of `op` and says whether it must fail (1), or not (0).
static int should_fail(int op, int on_dir) {
  const long call = atomic_fetch_add(&g_calls[op], 1) + 1;
  if (op != g_op || g_n <= 0) return 0;
  if (call == g_n || (g_persist && call > g_n)) {
    atomic_store(&g_fired, 1);
    if (on_dir) atomic_store(&g_fired_on_dir, 1);
    return 1;
  }
  return 0;
}

static unsigned char watched(int fd) { return fd >= 0 && fd < kMaxFd ? atomic_load(&g_watched[fd]) : 0; }

#define OPEN_MODE(flags, mode)                                         \
  mode_t mode = 0;                                                     \
  if ((flags) & (O_CREAT | __O_TMPFILE)) {                             \
    va_list ap;                                                        \
    va_start(ap, flags);                                               \
    mode = (mode_t)va_arg(ap, int);                                    \
    va_end(ap);                                                        \
  }

int open(const char* path, int flags, ...) {
  OPEN_MODE(flags, mode)
  const int fd = REAL(open_fn, open)(path, flags, mode);
  note_open(fd, AT_FDCWD, path, flags);
  return fd;
}
int open64(const char* path, int flags, ...) {
  OPEN_MODE(flags, mode)
  const int fd = REAL(open_fn, open64)(path, flags, mode);
  note_open(fd, AT_FDCWD, path, flags);
  return fd;
}
int openat(int dirfd, const char* path, int flags, ...) {
  OPEN_MODE(flags, mode)
  const int fd = REAL(openat_fn, openat)(dirfd, path, flags, mode);
  note_open(fd, dirfd, path, flags);
  return fd;
}
int openat64(int dirfd, const char* path, int flags, ...) {
  OPEN_MODE(flags, mode)
  const int fd = REAL(openat_fn, openat64)(dirfd, path, flags, mode);
  note_open(fd, dirfd, path, flags);
  return fd;
}

ssize_t write(int fd, const void* buf, size_t n) {
  const unsigned char w = watched(fd);
  if (w && should_fail(kOpWrite, w == 2)) {
    if (g_short) return n > 1 ? REAL(write_fn, write)(fd, buf, n / 2) : REAL(write_fn, write)(fd, buf, n);
    errno = g_errno;
    return -1;
  }
  return REAL(write_fn, write)(fd, buf, n);
}

int fsync(int fd) {
  const unsigned char w = watched(fd);
  if (w && should_fail(kOpFsync, w == 2)) {
    errno = g_errno;
    return -1;
  }
  return REAL(fd_fn, fsync)(fd);
}

int fdatasync(int fd) {
  const unsigned char w = watched(fd);
  if (w && should_fail(kOpFsync, w == 2)) {
    errno = g_errno;
    return -1;
  }
  return REAL(fd_fn, fdatasync)(fd);
}

int close(int fd) {
  const unsigned char w = watched(fd);
  if (w) atomic_store(&g_watched[fd], 0);
  const int fail = w && should_fail(kOpClose, w == 2);
  const int r = REAL(fd_fn, close)(fd);
  if (fail) {
    errno = g_errno;
    return -1;
  }
  return r;
}

int rename(const char* from, const char* to) {
  if (under_dir(AT_FDCWD, to) && should_fail(kOpRename, 0)) {
    errno = g_errno;
    return -1;
  }
  return REAL(rename_fn, rename)(from, to);
}

int renameat(int fromfd, const char* from, int tofd, const char* to) {
  if (under_dir(tofd, to) && should_fail(kOpRename, 0)) {
    errno = g_errno;
    return -1;
  }
  return REAL(renameat_fn, renameat)(fromfd, from, tofd, to);
}

int renameat2(int fromfd, const char* from, int tofd, const char* to, unsigned flags) {
  if (under_dir(tofd, to) && should_fail(kOpRename, 0)) {
    errno = g_errno;
    return -1;
  }
  return REAL(renameat2_fn, renameat2)(fromfd, from, tofd, to, flags);
}

int linkat(int fromfd, const char* from, int tofd, const char* to, int flags) {
  if (under_dir(tofd, to) && should_fail(kOpLinkat, 0)) {
    errno = g_errno;
    return -1;
  }
  return REAL(linkat_fn, linkat)(fromfd, from, tofd, to, flags);
}
