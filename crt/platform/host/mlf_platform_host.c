/*
 * mlf_platform_host.c — mlf_platform.h for a POSIX process: the console link is raw bytes
 * on fd 0 (in) and fd 1 (out), diagnostics go to stderr, ticks are CLOCK_MONOTONIC in ns.
 */
#define _XOPEN_SOURCE 700 /* POSIX 2008 + ptsname() */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "mlf_platform.h"

void mlf_platform_init(void) {
  /* The link carries binary frames: nothing may be buffered or translated on the way. */
  setvbuf(stdout, NULL, _IONBF, 0);
}

size_t mlf_platform_read(uint8_t* buf, size_t max) {
  for (;;) {
    ssize_t n = read(STDIN_FILENO, buf, max);
    if (n > 0) return (size_t)n;
    if (n == 0 || errno != EINTR) return 0; /* EOF or a dead link: gone for good */
  }
}

void mlf_platform_write(const uint8_t* buf, size_t n) {
  while (n > 0) {
    ssize_t written = write(STDOUT_FILENO, buf, n);
    if (written < 0) {
      if (errno == EINTR) continue;
      return; /* the host went away; nothing sensible left to do with the bytes */
    }
    buf += written;
    n -= (size_t)written;
  }
}

uint64_t mlf_platform_ticks(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

uint64_t mlf_platform_tick_hz(void) { return 1000000000u; }

/* A process has no timestamp pin for an energy monitor. */
int mlf_platform_timestamp_pulse(void) { return 0; }

void mlf_platform_log(const char* msg) { fprintf(stderr, "%s\n", msg); }

/* When the link is a pty whose master we hold, bytes not yet read by the host are thrown
 * away as soon as we exit (the slave is hung up): wait, up to 2 s, until the host has read
 * what we wrote last (the EXIT reply, the standalone result line). */
static void wait_until_output_read(void) {
  const char* slave = ptsname(STDOUT_FILENO);
  if (slave == NULL) return; /* a pipe or a file keeps its bytes */
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
  fflush(NULL);
  wait_until_output_read();
  exit(status);
}

void mlf_platform_abort(int code) {
  fprintf(stderr, "mlf runtime abort: code 0x%x\n", (unsigned)code);
  fflush(NULL);
  exit(134); /* like SIGABRT's status, without a core dump */
}
