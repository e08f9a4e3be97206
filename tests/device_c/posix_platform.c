/* posix_platform.c — mlf_platform.h for the test firmware: stdin/stdout are the link. */
#define _XOPEN_SOURCE 700 /* POSIX 2008 + ptsname() */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
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

/* As crt/platform/host: a pty drops what the host has not read once we exit, so wait (up to
 * 2 s) for the host to read the last bytes. */
static void wait_until_output_read(void) {
  const char* slave = ptsname(STDOUT_FILENO);
  if (slave == NULL) return;
  int fd = open(slave, O_RDWR | O_NOCTTY);
  for (int i = 0; fd >= 0 && i < 200; ++i) {
    int pending = 0;
    if (ioctl(fd, FIONREAD, &pending) != 0 || pending == 0) break;
    struct timespec pause = {0, 10 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  if (fd >= 0) close(fd);
}

void mlf_platform_exit(int status) {
  wait_until_output_read();
  exit(status);
}

void mlf_platform_abort(int code) {
  fprintf(stderr, "abort %d\n", code);
  abort();
}
