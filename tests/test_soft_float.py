"""The soft-float cores' ``mlf_fmac``/``mlf_fdot`` (modelgen/ops/tflite_soft_float.py)
against the two float operations they stand for, bit for bit, on millions of operands:
compiled on the host with its integer path forced on (``MLF_SOFT_FMAC=1``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from project_api.modelgen.ops.tflite_soft_float import SOFT_FMAC_C

CASES = 3_000_000

DRIVER = r"""
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
static long slow;
#define MLF_FMAC_SLOW() (++slow)
#include "fmac.h"
static uint64_t st = 88172645463325252ull;
static uint32_t rnd(void) { st ^= st << 13; st ^= st >> 7; st ^= st << 17; return (uint32_t)st; }
static float fb(uint32_t u) { mlf_fbits_t v; v.u = u; return v.f; }
static uint32_t bf(float f) { mlf_fbits_t v; v.f = f; return v.u; }
static uint32_t near(int32_t e, uint32_t m) {
  e = e < 1 ? 1 : (e > 254 ? 254 : e);
  return (rnd() & 0x80000000u) | ((uint32_t)e << 23) | m;
}
/* zeros, subnormals, infinities, NaN, short mantissas (ties), exponents near a hint */
static uint32_t operand(int32_t hint) {
  uint32_t s = rnd() & 0x80000000u, m = rnd() & 0x7fffffu, e = (rnd() % 254u) + 1u;
  switch (rnd() % 16u) {
    case 0: return s;
    case 1: return s | m;
    case 2: return s | 0x7f800000u | ((rnd() & 1u) ? (m | 1u) : 0u);
    case 3: return s | (e << 23) | (m & 0x7ff000u);
    case 4: return s | (e << 23) | (m & 0x700000u);
    case 5: case 6: case 7: return near(hint + (int32_t)(rnd() % 61u) - 30, m);
    case 8: return near(hint + (int32_t)(rnd() % 3u) - 1, m & ~((1u << (rnd() % 23u)) - 1u));
    default: return s | (e << 23) | m;
  }
}
static int same(float got, float want) {
  uint32_t g = bf(got), h = bf(want);
  int gn = (g & 0x7fffffffu) > 0x7f800000u, hn = (h & 0x7fffffffu) > 0x7f800000u;
  return gn || hn ? gn == hn : g == h;
}
int main(int argc, char** argv) {
  long n = atol(argv[1]), bad = 0, fused = 0, badDot = 0;
  for (long i = 0; i < n; ++i) {
    uint32_t xb = operand(127), wb = operand(127);
    int32_t pe = (int32_t)((xb >> 23) & 0xffu) + (int32_t)((wb >> 23) & 0xffu) - 127;
    uint32_t ab = operand(pe);
    if (rnd() % 8u == 0u) ab = bf(-(fb(xb) * fb(wb))) ^ (rnd() % 4u); /* cancellation */
    float x = fb(xb), w = fb(wb), acc = fb(ab);
    volatile float p = x * w;
    volatile float want = acc + p;
    if (!same(mlf_fmac(acc, x, w), want)) {
      if (bad++ < 5) printf("acc=%08x x=%08x w=%08x\n", ab, xb, wb);
    }
    if (!same(fmaf(x, w, acc), want)) ++fused; /* the control: one rounding differs */
  }
  long single = slow; /* mlf_fmac's calls the float operations answered */
  for (long i = 0; i < n / 16; ++i) { /* sums of up to 24 taps: zeros (ReLU), specials */
    float xs[24], ws[24], start = rnd() % 2u ? fb(operand(127)) : 0.0f, acc = start;
    int len = (int)(rnd() % 25u), wide = rnd() % 4u == 0u;
    for (int t = 0; t < len; ++t) {
      uint32_t m = rnd() & 0x7fffffu;
      xs[t] = rnd() % 3u ? fb(near(120 + (int32_t)(rnd() % 14u), m)) : 0.0f;
      ws[t] = fb(near(118 + (int32_t)(rnd() % 14u), rnd() & 0x7fffffu));
      if (wide) { xs[t] = fb(operand(127)); ws[t] = fb(operand(127)); }
      if (rnd() % 16u == 0u && t) xs[t] = -(acc / ws[t]); /* cancellation */
      volatile float p = xs[t] * ws[t];
      acc = acc + p;
    }
    if (!same(mlf_fdot(start, xs, ws, len), acc)) {
      if (badDot++ < 5) printf("dot %ld differs\n", i);
    }
  }
  printf("%ld %ld %ld %ld\n", bad, badDot, fused, single);
  return 0;
}
"""


def test_soft_fmac_rounds_as_the_float_operations(tmp_path: Path) -> None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no host C compiler")
    (tmp_path / "fmac.h").write_text("#include <stdint.h>\n" + SOFT_FMAC_C)
    (tmp_path / "driver.c").write_text(DRIVER)
    exe = tmp_path / "driver"
    # -ffp-contract=off: the reference's product and sum are two roundings, as in LiteRT
    subprocess.run([compiler, "-O2", "-ffp-contract=off", "-DMLF_SOFT_FMAC=1", "-Wall", "-Werror",
                    "-o", str(exe), str(tmp_path / "driver.c"), "-lm"], check=True)  # fmt: skip
    out = subprocess.run([str(exe), str(CASES)], capture_output=True, text=True, check=True)
    *shown, last = out.stdout.strip().splitlines()
    bad, bad_dot, fused, slow = (int(v) for v in last.split())
    assert (bad, bad_dot) == (0, 0), shown
    assert fused > CASES // 100, "the control: a fused multiply-add should differ"
    # the integer path answered most calls (the rest: zeros, subnormals, inf, NaN, overflow)
    assert slow < CASES * 0.6
