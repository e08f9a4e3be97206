"""``mlf_fmac(acc, x, w)``: ``acc + x · w`` with two IEEE roundings (the product rounded to
float32, then the sum), as LiteRT's float kernels compute each tap, in integer C for cores
without an FPU.

On a soft-float Cortex-M (``-mfloat-abi=soft``: the M3) each float multiply and add is a
libgcc call, about 70 instructions a tap. Where both operands and the accumulator are normal
numbers (and the product and sum stay normal), ``mlf_fmac`` computes the same bits in one
call: the 24×24-bit product in one ``UMULL``, rounded to nearest even, then the sum aligned
with a sticky bit, normalized with ``CLZ`` and rounded to nearest even again. A zero input
times a normal weight adds nothing to a nonzero accumulator (``a + ±0 = a``), which it
returns at once (ReLU's outputs are often zero). Everything else — zeros elsewhere,
subnormals, infinities, NaN, a product or sum outside the normal range — takes the two
float operations themselves, so the result is theirs by construction.

Why the sticky bit is exact: the mantissas carry six guard bits (the half-way point is bit
5) and the smaller one, shifted right, keeps bit 0 for the OR of every bit shifted out (its
own bit 0 cleared first). The computed sum then lies strictly between the same two even
numbers as the exact one, so it is on the same side of every half-way point (a multiple of
32) and never on one unless the exact sum is; a carry (one right shift, bit 0 kept) or a
one-bit normalization after a subtraction keeps that true, and a wider cancellation only
happens when nothing was shifted out. tests/test_soft_float.py compares it bit for bit with
the float operations on millions of operands, edge cases included.

Elsewhere (an FPU, the host, another architecture) ``mlf_fmac`` is the two float operations,
inline: the kernels' code is what it was.
"""

from __future__ import annotations

# The helpers' names in the kernels' C, and the macro that says the integer path is on.
FMAC = "mlf_fmac"
FDOT = "mlf_fdot"  # acc + x[0]·w[0] + ... + x[n-1]·w[n-1], soft-float cores only
SOFT = "MLF_SOFT_FMAC"

SOFT_FMAC_C = r"""
#ifndef MLF_SOFT_FMAC
#if defined(__GNUC__) && defined(__arm__) && defined(__SOFTFP__) && defined(__ARM_FEATURE_CLZ)
#define MLF_SOFT_FMAC 1
#else
#define MLF_SOFT_FMAC 0
#endif
#endif
#if MLF_SOFT_FMAC
#ifndef MLF_FMAC_SLOW
#define MLF_FMAC_SLOW() /* a test counts the calls the float operations answer */
#endif
typedef union { float f; uint32_t u; } mlf_fbits_t;
#define MLF_FMAC_ATTRS(...) __attribute__((__VA_ARGS__, no_instrument_function))
static inline MLF_FMAC_ATTRS(always_inline) float mlf_fmac_(float acc, float x, float w) {
  mlf_fbits_t av, xv, wv, r;
  av.f = acc; xv.f = x; wv.f = w;
  uint32_t a = av.u, xb = xv.u, wb = wv.u;
  uint32_t ex = (xb << 1) >> 24, ew = (wb << 1) >> 24, ea = (a << 1) >> 24;
  if (ew - 1u < 254u) {
    if (ex - 1u < 254u) {
      /* the product: mantissas with their leading one at bit 31, 64 bits exact */
      uint64_t prod = (uint64_t)((xb << 8) | 0x80000000u) * ((wb << 8) | 0x80000000u);
      uint32_t hi = (uint32_t)(prod >> 32), lo = (uint32_t)prod;
      int32_t ep = (int32_t)(ex + ew) - 126;
      if (!(hi >> 31)) { hi = (hi << 1) | (lo >> 31); lo <<= 1; ep -= 1; }
      uint32_t mp = hi >> 8, g = hi & 0xffu;
      if (g > 0x80u || (g == 0x80u && (lo || (mp & 1u)))) {
        mp += 1u;
        if (mp >> 24) { mp >>= 1; ep += 1; }
      }
      uint32_t sp = (xb ^ wb) & 0x80000000u;
      if (ep > 0 && ep < 255) {
        if (ea - 1u < 254u) {
          /* the sum of two normal numbers; mantissas at bits 6..29, bit 0 sticky */
          uint32_t ma = ((a << 8) | 0x80000000u) >> 2, mq = mp << 6;
          uint32_t sa = a & 0x80000000u, sb, mb, ms;
          int32_t eb, d = (int32_t)ea - ep;
          if (d >= 0) { eb = (int32_t)ea; sb = sa; mb = ma; ms = mq; }
          else { eb = ep; sb = sp; mb = mq; ms = ma; d = -d; }
          if (d >= 31) {
            ms = 1u;
          } else if (d) {
            uint32_t sticky = (ms & ((2u << d) - 1u)) != 0u;
            ms = ((ms >> d) & ~1u) | sticky;
          }
          uint32_t s;
          if (sa == sp) {
            s = mb + ms;
            if (s >> 30) { s = (s >> 1) | (s & 1u); eb += 1; }
          } else {
            s = mb - ms;
            if ((int32_t)s <= 0) {
              if (s == 0u) return 0.0f; /* x - x = +0 */
              s = 0u - s; sb ^= 0x80000000u; /* only when d == 0: exact */
            }
            int32_t n = __builtin_clz(s) - 2;
            s <<= n; eb -= n;
          }
          uint32_t low = s & 0x3fu;
          s >>= 6;
          if (low > 0x20u || (low == 0x20u && (s & 1u))) {
            s += 1u;
            if (s >> 24) { s >>= 1; eb += 1; }
          }
          if (eb > 0 && eb < 255) {
            r.u = sb | ((uint32_t)eb << 23) | (s & 0x7fffffu);
            return r.f;
          }
        } else if ((a << 1) == 0u) {
          r.u = sp | ((uint32_t)ep << 23) | (mp & 0x7fffffu); /* ±0 + p = p */
          return r.f;
        }
      }
    } else if ((xb << 1) == 0u && (a << 1) != 0u) {
      return acc; /* a + (±0) = a */
    }
  }
  {
    MLF_FMAC_SLOW();
    float pf = x * w;
    return acc + pf;
  }
}
static MLF_FMAC_ATTRS(noinline, unused) float mlf_fmac(float acc, float x, float w) {
  return mlf_fmac_(acc, x, w);
}
/* acc + x[0]·w[0] + x[1]·w[1] + ... in that order, each step rounded as above */
static MLF_FMAC_ATTRS(noinline, unused) float mlf_fdot(float acc, const float* x, const float* w,
                                                       int32_t n) {
  for (int32_t t = 0; t < n; ++t) acc = mlf_fmac_(acc, x[t], w[t]);
  return acc;
}
#else
static inline float mlf_fmac(float acc, float x, float w) {
  float p = x * w;
  return acc + p;
}
#endif
"""
