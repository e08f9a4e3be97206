/* posix_platform.c — mlf_platform.h for the test firmware: stdin/stdout are the link. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "mlf_platform.h"

void mlf_platform_init(void) {}

size_t mlf_platform_read(uint8_t* buf, size_t max) {
  for (;;) {
    ssize_t got = read(STDIN_FILENO, buf, max);
    if (got > 0) return (size_t)got;
    if (got < 0 && errno == EINTR) continue;
    return 0; /* EOF, or EIO once the other end of the pty is closed */
  }
}

void mlf_platform_write(const uint8_t* buf, size_t n) {
  while (n > 0) {
    ssize_t put = write(STDOUT_FILENO, buf, n);
    if (put < 0) {
      if (errno == EINTR) continue;
      _exit(3); /* nobody is listening any more */
    }
    buf += put;
    n -= (size_t)put;
  }
}

uint64_t mlf_platform_ticks(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t mlf_platform_tick_hz(void) { return 1000000000u; }

void mlf_platform_log(const char* msg) { fprintf(stderr, "%s\n", msg); }

void mlf_platform_exit(int status) { exit(status); }

void mlf_platform_abort(int code) {
  fprintf(stderr, "abort %d\n", code);
  abort();
}
