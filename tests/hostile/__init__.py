"""Hostile models for the sandbox tests (issues 34 and 41), one package of every payload:
this module's runtime payloads, :mod:`hostile.build` (compiler output that speaks to the
trusted parent) and :mod:`hostile.toolchain` (a compiler reached through a fake ``$HOME``).

Here: an archive whose C tries to leave the firmware.

:func:`runtime_archive` adds a C file to an archive (the tests use a factory model) that,
from a constructor and from the first operator call, tries (a native firmware) to read a
file outside, create a file, run ``/bin/sh``, connect to a local TCP listener and to a Unix
socket, signal its parent and read its parent's environment, lower the open-files limit of
another process of the user's (``prlimit64``) and signal it every way there is (``kill``,
``tgkill``, ``rt_sigqueueinfo``, ``rt_tgsigqueueinfo``, ``pidfd_send_signal``; signal 0, which
only checks the right), ``truncate(2)`` a file of the user's and make an ``ioctl`` its console
does not need (``TIOCGWINSZ``); or (Arm and RISC-V guests under QEMU) open and write host
files through semihosting. Every attempt prints one line ``HOSTILE <stage> <attempt>
denied|ESCAPED`` on stderr (native) or through semihosting (guest), and the model still
computes its outputs.

:func:`build_archive` adds C that compiles a file outside the project into the firmware,
through ``#include`` or an assembler ``.incbin``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Tuple

from mlf_builders import tar_files, write_tar

ATTEMPTS_NATIVE = (
    "read", "create", "exec", "connect", "signal-parent", "read-parent", "prlimit-other",
    "kill-other", "tgkill-other", "sigqueue-other", "tgsigqueue-other", "pidfd-signal",
    "truncate", "ioctl", "connect-unix",
)  # fmt: skip
# The open-files limit the payload gives another process (``Max open files`` in its limits).
VICTIM_NOFILE = 7
ATTEMPTS_GUEST = ("semihost-read", "semihost-write")
STAGES = ("constructor", "operator")

_PROBE_C = r"""
/* A hostile model: it tries to leave the firmware (tests/hostile/). */
#define _GNU_SOURCE 1
#include <stddef.h>
#include <string.h>

#define SECRET_PATH "@SECRET@"
#define CREATE_PATH "@CREATE@"
#define EXEC_MARK "@MARK@"
#define PORT @PORT@
#define VICTIM_PID @VICTIM_PID@
#define VICTIM_FILE "@VICTIM_FILE@"
#define VICTIM_NOFILE @VICTIM_NOFILE@
#define UNIX_PATH "@UNIX@"

#if defined(__linux__)
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

static void report(const char* stage, const char* attempt, int escaped) {
  char line[160];
  snprintf(line, sizeof line, "HOSTILE %s %s %s\n", stage, attempt, escaped ? "ESCAPED" : "denied");
  (void)!write(2, line, strlen(line));
}

static int read_file(const char* path) {
  char buf[64];
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  return n > 0;
}

/* Another process of the user's: its limits, and a signal 0 (the right checked, nothing sent)
 * through every call that can name it. */
static void other_process(const char* stage) {
  struct rlimit own;
  int escaped = 0;
  if (getrlimit(RLIMIT_NOFILE, &own) == 0) {
    struct rlimit lowered = {VICTIM_NOFILE, own.rlim_max};
    escaped = syscall(SYS_prlimit64, VICTIM_PID, RLIMIT_NOFILE, &lowered, NULL) == 0;
  }
  report(stage, "prlimit-other", escaped);
  report(stage, "kill-other", kill(VICTIM_PID, 0) == 0);
  report(stage, "tgkill-other", syscall(SYS_tgkill, VICTIM_PID, VICTIM_PID, 0) == 0);
  siginfo_t info;
  memset(&info, 0, sizeof info);
  info.si_code = SI_QUEUE;
  info.si_pid = getpid();
  info.si_uid = getuid();
  report(stage, "sigqueue-other", syscall(SYS_rt_sigqueueinfo, VICTIM_PID, 0, &info) == 0);
  report(stage, "tgsigqueue-other",
         syscall(SYS_rt_tgsigqueueinfo, VICTIM_PID, VICTIM_PID, 0, &info) == 0);
  int pidfd = (int)syscall(SYS_pidfd_open, VICTIM_PID, 0);
  escaped = pidfd >= 0 && syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0;
  if (pidfd >= 0) close(pidfd);
  report(stage, "pidfd-signal", escaped);
}

static void attempts(const char* stage) {
  char path[256];
  report(stage, "read", read_file(SECRET_PATH));

  snprintf(path, sizeof path, "%s.%s", CREATE_PATH, stage);
  int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd >= 0) close(fd);
  report(stage, "create", fd >= 0);

  snprintf(path, sizeof path, "echo > %s.%s", EXEC_MARK, stage);
  pid_t child = fork();
  if (child == 0) {
    execl("/bin/sh", "sh", "-c", path, (char*)NULL);
    _exit(127);
  }
  int escaped = 0;
  if (child > 0) {
    int status = 0;
    escaped = waitpid(child, &status, 0) == child && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0;
  } else {
    execl("/bin/sh", "sh", "-c", path, (char*)NULL); /* returns only when refused */
  }
  report(stage, "exec", escaped);

  int sock = socket(AF_INET, SOCK_STREAM, 0);
  escaped = 0;
  if (sock >= 0) {
    struct sockaddr_in to;
    memset(&to, 0, sizeof to);
    to.sin_family = AF_INET;
    to.sin_port = htons(PORT);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    escaped = connect(sock, (struct sockaddr*)&to, sizeof to) == 0;
    if (escaped) (void)!write(sock, "HOSTILE", 7);
    close(sock);
  }
  report(stage, "connect", escaped);

  report(stage, "signal-parent", kill(getppid(), 0) == 0);
  snprintf(path, sizeof path, "/proc/%d/environ", (int)getppid());
  report(stage, "read-parent", read_file(path));

  other_process(stage);

  report(stage, "truncate", truncate(VICTIM_FILE, 0) == 0);

  struct winsize size;
  report(stage, "ioctl", ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0);

  sock = socket(AF_UNIX, SOCK_STREAM, 0);
  escaped = 0;
  if (sock >= 0) {
    struct sockaddr_un to;
    memset(&to, 0, sizeof to);
    to.sun_family = AF_UNIX;
    strncpy(to.sun_path, UNIX_PATH, sizeof to.sun_path - 1);
    escaped = connect(sock, (struct sockaddr*)&to, sizeof to) == 0;
    close(sock);
  }
  report(stage, "connect-unix", escaped);
}

#elif defined(__arm__) || defined(__riscv)

#if defined(__arm__)
static long semihost(long op, void* arg) {
  register long r0 __asm__("r0") = op;
  register void* r1 __asm__("r1") = arg;
  __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}
#else
/* ebreak between two hints, uncompressed, in one 16-byte aligned function (one page) */
__attribute__((naked, noinline, aligned(16))) static long semihost(long op, void* arg) {
  (void)op;
  (void)arg;
  __asm__ volatile(
      ".option push\n\t.option norvc\n\t"
      "slli zero, zero, 0x1f\n\tebreak\n\tsrai zero, zero, 7\n\t.option pop\n\tret\n\t");
}
#endif

static void report(const char* stage, const char* attempt, int escaped) {
  static char line[96];
  const char* parts[] = {"HOSTILE ", stage, " ", attempt, escaped ? " ESCAPED\n" : " denied\n"};
  size_t used = 0;
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; ++i) {
    size_t n = strlen(parts[i]);
    if (used + n >= sizeof line) n = sizeof line - 1 - used;
    memcpy(line + used, parts[i], n);
    used += n;
  }
  line[used] = 0;
  semihost(0x04, line); /* SYS_WRITE0 */
}

static long host_open(const char* path, long mode) {
  long args[3] = {(long)path, mode, (long)strlen(path)};
  return semihost(0x01, args); /* SYS_OPEN */
}

static void attempts(const char* stage) {
  static char buf[64];
  long handle = host_open(SECRET_PATH, 0); /* "r" */
  int escaped = 0;
  if (handle != -1) {
    long args[3] = {handle, (long)buf, (long)sizeof buf};
    escaped = semihost(0x06, args) < (long)sizeof buf; /* SYS_READ: bytes not read */
    long close_args[1] = {handle};
    semihost(0x02, close_args);
  }
  report(stage, "semihost-read", escaped);

  static char path[160];
  size_t n = strlen(CREATE_PATH);
  memcpy(path, CREATE_PATH, n);
  path[n] = '.';
  strcpy(path + n + 1, stage);
  handle = host_open(path, 4); /* "w" */
  escaped = handle != -1;
  if (escaped) {
    long args[3] = {handle, (long)"HOSTILE", 7};
    semihost(0x05, args); /* SYS_WRITE */
    long close_args[1] = {handle};
    semihost(0x02, close_args);
  }
  report(stage, "semihost-write", escaped);
}

#else
static void attempts(const char* stage) { (void)stage; }
#endif

__attribute__((constructor)) static void mlf_hostile_constructor(void) { attempts("constructor"); }

void mlf_hostile_probe(void) {
  static int done;
  if (!done) {
    done = 1;
    attempts("operator");
  }
}
"""

_INCLUDE_C = r"""
/* A hostile model: it compiles a file outside the project into the firmware. */
static const char mlf_stolen[] =
#include "@SECRET@"
    ;
const char* mlf_hostile_keep(void) { return mlf_stolen; }
"""

_INCBIN_C = r"""
/* A hostile model: it assembles a file outside the project into the firmware. */
__asm__(".section .rodata.mlf_stolen,\"a\"\n"
        ".global mlf_stolen\n"
        "mlf_stolen:\n"
        ".incbin \"@SECRET@\"\n"
        ".byte 0\n"
        ".previous\n");
extern const char mlf_stolen[];
const char* mlf_hostile_keep(void) { return mlf_stolen; }
"""


@dataclass
class Paths:
    """What a hostile model reaches for, all outside its project."""

    secret: Path  # a file it tries to read (content SECRET_TEXT)
    create: Path  # prefix of files it tries to create (.constructor / .operator)
    mark: Path  # prefix of files its /bin/sh would create
    port: int  # a TCP listener on 127.0.0.1
    victim_file: Path  # a file of the user's it tries to truncate (content VICTIM_TEXT)
    unix: Path  # a listening Unix socket
    victim_pid: int  # another process of the user's (0: none given)

    def created(self) -> List[Path]:
        """Every file an escape would have left behind."""
        found = []
        for prefix in (self.create, self.mark):
            found += sorted(prefix.parent.glob(prefix.name + ".*"))
        return found


SECRET_TEXT = '"mlf-hostile-SECRET-4f1c9a"'  # a C string literal, so #include compiles too
VICTIM_TEXT = "the user's own file\n"


def make_paths(root: Path, port: int, victim_pid: int = 0) -> Paths:
    root.mkdir(parents=True, exist_ok=True)
    secret = root / "secret.txt"
    secret.write_text(SECRET_TEXT + "\n")
    victim = root / "victim.txt"
    victim.write_text(VICTIM_TEXT)
    return Paths(secret, root / "created", root / "exec-mark", port, victim,
                 root / "unix.sock", victim_pid)  # fmt: skip


def runtime_archive(model_tar: Path, dest: Path, paths: Paths) -> Path:
    """``model_tar`` with the probe compiled in and called from its first operator."""
    values = {
        "@SECRET@": str(paths.secret),
        "@CREATE@": str(paths.create),
        "@MARK@": str(paths.mark),
        "@PORT@": str(paths.port),
        "@VICTIM_PID@": str(paths.victim_pid or 0x7FFFFFF0),  # none: a pid no one has
        "@VICTIM_FILE@": str(paths.victim_file),
        "@VICTIM_NOFILE@": str(VICTIM_NOFILE),
        "@UNIX@": str(paths.unix),
    }
    source = _PROBE_C
    for key, value in values.items():
        source = source.replace(key, value)
    return _with_source(model_tar, dest, source, "mlf_hostile_probe();")


def build_archive(model_tar: Path, dest: Path, secret: Path, how: str) -> Path:
    """``model_tar`` with C that pulls ``secret`` in through ``how`` (include/incbin)."""
    template = {"include": _INCLUDE_C, "incbin": _INCBIN_C}[how]
    call = "{ const char* volatile keep = mlf_hostile_keep(); (void)keep; }"
    return _with_source(model_tar, dest, template.replace("@SECRET@", str(secret)), call)


def _with_source(model_tar: Path, dest: Path, source: str, call: str) -> Path:
    files: Dict[str, bytes] = tar_files(model_tar)
    src_dir = next(name.rsplit("/", 1)[0] for name in files if "codegen/host/src/" in name)
    target, definition = _operator_definition(files, src_dir)
    text = files[target].decode()
    prototypes = "void mlf_hostile_probe(void);\nconst char* mlf_hostile_keep(void);\n"
    text = prototypes + text[: definition.end()] + "\n  " + call + text[definition.end() :]
    files[target] = text.encode()
    files[f"{src_dir}/hostile_lib9.c"] = source.encode()
    return write_tar(dest, files)


_DEFINITION = re.compile(r"TVM_DLL int32_t tvmgen_\w+\([^)]*\)\s*\{")


def _operator_definition(files: Dict[str, bytes], src_dir: str) -> Tuple[str, re.Match]:
    """The first source defining an operator function, and where its body starts."""
    for name in sorted(files):
        if name.startswith(src_dir):
            found = _DEFINITION.search(files[name].decode("utf-8", "replace"))
            if found is not None:
                return name, found
    raise AssertionError(f"no operator definition under {src_dir}")


def outcomes(log: str) -> Dict[str, str]:
    """``{"<stage> <attempt>": "denied"|"ESCAPED"}`` from a run's log."""
    found = {}
    for match in re.finditer(r"HOSTILE (\w+) ([\w-]+) (denied|ESCAPED)", log):
        found[f"{match.group(1)} {match.group(2)}"] = match.group(3)
    return found
