// The I/O fault injector's controls for a test binary that links it (io_fault.c; a process that
// LD_PRELOADs it is configured by SKAINET_IOFAULT_* environment variables instead).
//
//   skainet_iofault_configure("/tmp/x", "fsync", 2, EIO, 0);   // the 2nd fsync under /tmp/x fails
//   ... write a file there ...
//   skainet_iofault_fired();                                  // 1: it did
//   skainet_iofault_configure(NULL, NULL, 0, 0, 0);           // off again
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

// Resets the counts. `op`: write, short_write, fsync (and fdatasync), close, rename (and renameat,
// renameat2), linkat; `n` = 0 counts without failing; `persist`: the calls after the nth fail too.
void skainet_iofault_configure(const char* dir, const char* op, long n, int err, int persist);
// Calls of `op` (write, fsync, close, rename, linkat) counted since the last configure.
long skainet_iofault_calls(const char* op);
int skainet_iofault_fired(void);
// Whether the failed call was on the directory itself (its fsync or close), not on a file in it.
int skainet_iofault_fired_on_directory(void);

#ifdef __cplusplus
}
#endif
