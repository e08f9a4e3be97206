"""Builds the C test programs under tests/device_c/ for the Python tests (cached per session).

Imported by the tests as ``device_c.cbuild`` (tests/ is on sys.path under pytest)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Optional, Sequence

import pytest

REPO = Path(__file__).resolve().parents[2]
FIRMWARE = REPO / "template_project" / "firmware"
CRT_INCLUDE = REPO / "crt" / "include"
DEVICE_C = Path(__file__).resolve().parent
# The test firmwares use the real host platform, so its behaviour on a pty is what is tested.
CRT_HOST_PLATFORM = REPO / "crt" / "platform" / "host" / "mlf_platform_host.c"
WARNINGS = ("-Wall", "-Wextra", "-Werror")


def c_compiler() -> Optional[str]:
    for name in ("gcc", "cc", "clang"):
        if shutil.which(name):
            return name
    return None


def build(
    cache: Path,
    name: str,
    sources: Sequence[Path],
    *,
    compiler: Optional[str] = None,
    flags: Sequence[str] = ("-std=c11", "-O2"),
    libs: Sequence[str] = (),
) -> Path:
    """Compiles sources into cache/<name>-<hash> (reused while sources and flags are equal)."""
    cc = compiler or c_compiler()
    if cc is None:
        pytest.skip("no C compiler (gcc, cc or clang) on PATH")
    digest = hashlib.sha256()
    for part in (cc, *flags, *libs, *map(str, sources)):
        digest.update(part.encode() + b"\0")
    for source in sources:
        digest.update(source.read_bytes())
    for header in sorted([*FIRMWARE.glob("*.h"), *DEVICE_C.glob("*.h"), *CRT_INCLUDE.rglob("*.h")]):
        digest.update(header.read_bytes())
    out = cache / f"{name}-{digest.hexdigest()[:12]}"
    if out.exists():
        return out
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [
        cc,
        *flags,
        *WARNINGS,
        f"-I{FIRMWARE}",
        f"-I{CRT_INCLUDE}",
        f"-I{DEVICE_C}",
        "-o",
        str(out),
        *map(str, sources),
        *libs,
    ]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise AssertionError(f"build of {name} failed:\n{' '.join(cmd)}\n{result.stderr}")
    return out


def device_test_firmware(cache: Path) -> Path:
    return build(
        cache,
        "device_test",
        [
            DEVICE_C / "device_test_main.c",
            DEVICE_C / "fake_runtime.c",
            CRT_HOST_PLATFORM,
            FIRMWARE / "mlf_device.c",
            FIRMWARE / "mlf_frame.c",
            FIRMWARE / "mlf_text.c",
        ],
    )


def standalone_test_firmware(cache: Path) -> Path:
    return build(
        cache,
        "standalone_test",
        [
            DEVICE_C / "standalone_test_main.c",
            DEVICE_C / "fake_runtime.c",
            CRT_HOST_PLATFORM,
            FIRMWARE / "mlf_standalone.c",
            FIRMWARE / "mlf_frame.c",
            FIRMWARE / "mlf_text.c",
        ],
    )


def frame_tool(cache: Path) -> Path:
    return build(cache, "frame_tool", [DEVICE_C / "frame_tool.c", FIRMWARE / "mlf_frame.c"])


def real_runtime_firmware(cache: Path) -> Path:
    """The device loop over the real runtime (crt/src), the host platform and the
    hand-written model of tiny_model.c."""
    runtime = sorted(p for p in (REPO / "crt" / "src").glob("*.c") if p.name != "mlf_tvm_compat.c")
    platform = REPO / "crt" / "platform" / "host" / "mlf_platform_host.c"
    if not runtime or not platform.exists():
        pytest.skip("the runtime (crt/src, crt/platform/host) is not there yet")
    return build(
        cache,
        "real_runtime",
        [
            DEVICE_C / "real_runtime_main.c",
            DEVICE_C / "tiny_model.c",
            *runtime,
            platform,
            FIRMWARE / "mlf_device.c",
            FIRMWARE / "mlf_frame.c",
            FIRMWARE / "mlf_text.c",
        ],
        flags=("-std=c11", "-O2", f"-I{REPO / 'crt' / 'src'}"),
        libs=("-lm",),
    )
