/*
 * mlf_text.c — text lines and tensor elements as numbers (see mlf_text.h).
 */
#include "mlf_text.h"

#include <string.h>

#include "mlf_platform.h"

void mlf_text_flush(mlf_text* out) {
  if (out->fill > 0) {
    mlf_platform_write((const uint8_t*)out->line, out->fill);
    out->fill = 0;
  }
}

void mlf_text_char(mlf_text* out, char c) {
  if (out->fill == sizeof(out->line)) mlf_text_flush(out);
  out->line[out->fill++] = c;
}

size_t mlf_text_length(const char* s, size_t limit) {
  /* Bounded: GCC turns an unbounded loop like this back into a call to strlen. */
  size_t n = 0;
  while (n < limit && s[n] != '\0') ++n;
  return n;
}

int mlf_bytes_equal(const void* a, const void* b, size_t n) {
  const uint8_t* x = (const uint8_t*)a;
  const uint8_t* y = (const uint8_t*)b;
  for (size_t i = 0; i < n; ++i) {
    if (x[i] != y[i]) return 0;
  }
  return 1;
}

void mlf_text_str(mlf_text* out, const char* s) {
  while (*s) mlf_text_char(out, *s++);
}

void mlf_text_safe(mlf_text* out, const char* s) {
  for (; *s; ++s) mlf_text_char(out, (unsigned char)*s < 0x20 ? '?' : *s);
}

uint64_t mlf_text_divide(uint64_t n, uint32_t d, uint32_t* rem) {
  uint64_t quotient = 0, r = 0;
  if (n >> 32 == 0) { /* the common case: one hardware divide */
    *rem = (uint32_t)n % d;
    return (uint32_t)n / d;
  }
  for (int bit = 63; bit >= 0; --bit) {
    r = r << 1 | (n >> bit & 1u);
    if (r >= d) {
      r -= d;
      quotient |= (uint64_t)1 << bit;
    }
  }
  *rem = (uint32_t)r;
  return quotient;
}

void mlf_text_u64(mlf_text* out, uint64_t v) {
  char digits[20];
  size_t n = 0;
  uint32_t digit;
  do {
    v = mlf_text_divide(v, 10u, &digit);
    digits[n++] = (char)('0' + digit);
  } while (v != 0);
  while (n > 0) mlf_text_char(out, digits[--n]);
}

void mlf_text_i64(mlf_text* out, int64_t v) {
  if (v < 0) {
    mlf_text_char(out, '-');
    mlf_text_u64(out, (uint64_t)0 - (uint64_t)v);
  } else {
    mlf_text_u64(out, (uint64_t)v);
  }
}

void mlf_text_hex_byte(mlf_text* out, uint8_t b) {
  static const char kHex[] = "0123456789abcdef";
  mlf_text_char(out, kHex[b >> 4]);
  mlf_text_char(out, kHex[b & 15u]);
}

static void labelled_number(mlf_text* out, const char* label, uint32_t value) {
  mlf_text_str(out, label);
  mlf_text_u64(out, value);
}

void mlf_text_field(mlf_text* out, const char* s, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = (unsigned char)s[i];
    mlf_text_char(out, c < 0x20 || c > 0x7E ? '?' : c == '[' ? '(' : c == ']' ? ')' : (char)c);
  }
}

void mlf_text_error(mlf_text* out, mlf_status status, const mlf_error* err) {
  labelled_number(out, "error ", (uint32_t)status);
  if (err == NULL || err->status != status) return;
  if (err->why != 0) labelled_number(out, ": #", err->why);
  if (err->subject != NULL) {
    mlf_text_str(out, " '");
    mlf_text_field(out, err->subject, err->subject_len);
    mlf_text_char(out, '\'');
  }
  if (err->node != UINT32_MAX) labelled_number(out, " at node ", err->node);
  if (err->offset != UINT32_MAX) labelled_number(out, " at byte ", err->offset);
}

/* ---- numbers ------------------------------------------------------------------------- */

#define SIGNIFICANT 9
#define POW10_9 1000000000u

/* The 9 significant digits of mantissa * 2^exponent (mantissa > 0), correctly rounded up to
 * the bits lost bringing the value to a decimal exponent; *decimal gets the power of ten of
 * the first digit. Integer arithmetic: the value is kept as x * 2^b * 10^d. */
static uint32_t significant_digits(uint64_t x, int32_t b, int32_t* decimal) {
  int32_t d = 0;
  uint32_t digit;
  /* One step at a time until b is 0 and x has ten digits: a decimal digit out when x would
   * overflow, or is too long; a binary one in or out otherwise (exact but for the bits
   * dropped, which only the rounding below can see). */
  for (;;) {
    if (b > 0 ? x >> 63 != 0 : b == 0 && x >= (uint64_t)POW10_9 * 10u) {
      x = mlf_text_divide(x, 10u, &digit);
      ++d;
    } else if (b > 0) {
      x <<= 1;
      --b;
    } else if (x <= UINT64_MAX / 10u && (b < 0 || x < POW10_9)) {
      x *= 10u;
      --d;
    } else if (b < 0) {
      x >>= 1;
      ++b;
    } else {
      break;
    }
  }
  /* Ten digits, then rounded to nine (half up: the tenth digit is exact). */
  uint32_t digits = (uint32_t)mlf_text_divide(x + 5u, 10u, &digit); /* below 2^32 */
  ++d;
  if (digits == POW10_9) {
    digits /= 10u;
    ++d;
  }
  *decimal = d + SIGNIFICANT - 1;
  return digits;
}

void mlf_text_number(mlf_text* out, const mlf_number* v) {
  if (v->kind == MLF_NUMBER_NAN) {
    mlf_text_str(out, "nan");
    return;
  }
  if (v->negative) mlf_text_char(out, '-');
  if (v->kind == MLF_NUMBER_INTEGER) {
    mlf_text_u64(out, v->mantissa);
    return;
  }
  if (v->kind == MLF_NUMBER_INF || !MLF_TEXT_FLOATS) {
    mlf_text_str(out, "inf"); /* without floats, no float reaches here */
    return;
  }
  if (v->mantissa == 0) {
    mlf_text_str(out, "0.0");
    return;
  }
  int32_t exponent;
  uint32_t digits = significant_digits(v->mantissa, v->exponent, &exponent);
  char text[SIGNIFICANT];
  for (int i = SIGNIFICANT - 1; i >= 0; --i) {
    text[i] = (char)('0' + digits % 10u);
    digits /= 10u;
  }
  int count = SIGNIFICANT;
  while (count > 1 && text[count - 1] == '0') --count;
  /* Digits before the point: all of the integer part in plain notation, one with an
   * exponent. Below 1, the places from the units on are zeros up to the first digit. */
  const int plain = exponent >= -5 && exponent < SIGNIFICANT;
  const int point = plain ? exponent + 1 : 1;
  for (int i = point > 0 ? 0 : point - 1; i < count || i < point; ++i) {
    if (i == point) mlf_text_char(out, '.');
    mlf_text_char(out, i >= 0 && i < count ? text[i] : '0');
  }
  if (count <= point) mlf_text_str(out, ".0"); /* 3.0: a float, whole or not */
  if (!plain) {
    mlf_text_char(out, 'e');
    mlf_text_char(out, exponent < 0 ? '-' : '+');
    if (exponent > -10 && exponent < 10) mlf_text_char(out, '0');
    mlf_text_u64(out, (uint64_t)(exponent < 0 ? -exponent : exponent));
  }
}

/* ---- tensor elements ----------------------------------------------------------------- */

/* An IEEE 754 binary number of `bits` with `fraction` bits of fraction. */
static void decode_float(uint64_t raw, unsigned bits, unsigned fraction, mlf_number* v) {
  const unsigned exponent_bits = bits - 1u - fraction;
  const uint32_t all_ones = (1u << exponent_bits) - 1u;
  const uint32_t top = (uint32_t)(raw >> fraction); /* sign and biased exponent */
  const uint32_t biased = top & all_ones;
  v->mantissa = raw ^ (uint64_t)top << fraction;
  v->negative = (uint8_t)(top >> exponent_bits);
  v->kind = biased != all_ones ? MLF_NUMBER_FLOAT
            : v->mantissa != 0 ? MLF_NUMBER_NAN
                               : MLF_NUMBER_INF;
  if (biased != 0) v->mantissa += (uint64_t)1 << fraction;
  /* the bias is all_ones / 2; subnormals share the smallest normal exponent */
  v->exponent = (int32_t)(biased != 0 ? biased : 1u) - (int32_t)(all_ones >> 1) - (int32_t)fraction;
}

int mlf_text_element(const uint8_t* data, DLDataType t, size_t i, mlf_number* value) {
  const size_t width = (t.bits + 7u) / 8u;
  if (t.lanes != 1 || (width != 1 && width != 2 && width != 4 && width != 8)) return 0;
  uint64_t raw = 0;
  /* Little-endian words, as every supported target stores them. */
  for (size_t b = width; b > 0; --b) raw = raw << 8 | data[i * width + b - 1];
  const int whole = t.bits == 8 * width;
  value->exponent = 0;
  value->negative = 0;
  value->kind = MLF_NUMBER_INTEGER;
  if (t.code == kDLInt && whole) {
    const uint64_t sign = (uint64_t)1 << (t.bits - 1u);
    if (raw & sign) {
      value->negative = 1;
      raw = (sign << 1) - raw; /* the magnitude (2^64 - raw when 64 bits wide) */
    }
    value->mantissa = raw;
    return 1;
  }
  if (t.code == kDLUInt && (whole || t.bits == 1)) {
    value->mantissa = raw;
    return 1;
  }
  if (!MLF_TEXT_FLOATS) return 0;
  if (t.code == kDLFloat && whole && width >= 2) {
    decode_float(raw, t.bits, width == 2 ? 10u : width == 4 ? 23u : 52u, value);
    return 1;
  }
  if (t.code == kDLBfloat && t.bits == 16) {
    decode_float(raw, 16u, 7u, value);
    return 1;
  }
  return 0;
}

/* The magnitude's place: 1 + the power of two of its top bit (0 for zero). */
static int32_t magnitude_order(const mlf_number* v, uint64_t* top) {
  uint64_t m = v->mantissa;
  int32_t e = v->kind == MLF_NUMBER_INTEGER ? 0 : v->exponent;
  if (v->kind == MLF_NUMBER_INF) return INT32_MAX;
  if (m == 0) return INT32_MIN;
  while (!(m >> 63)) {
    m <<= 1;
    --e;
  }
  *top = m;
  return e;
}

int mlf_number_compare(const mlf_number* a, const mlf_number* b) {
  uint64_t ta = 0, tb = 0;
  int32_t ea = magnitude_order(a, &ta), eb = magnitude_order(b, &tb);
  int sa = ea == INT32_MIN ? 0 : a->negative ? -1 : 1;
  int sb = eb == INT32_MIN ? 0 : b->negative ? -1 : 1;
  if (sa != sb || sa == 0) return sa - sb;
  int larger = ea != eb ? (ea > eb ? 1 : -1) : ta != tb ? (ta > tb ? 1 : -1) : 0;
  return sa * larger;
}

mlf_number mlf_number_dequantized(const mlf_number* q, int32_t zero_point, float scale) {
  /* float32 arithmetic, as the reference computes it: its soft-float routines are about the
   * size of an integer emulation, and a model with float code (a softmax) links them anyway.
   * q - zero_point is exact for every integer below 2^63 in magnitude. */
  const int64_t shifted =
      (q->negative ? -(int64_t)q->mantissa : (int64_t)q->mantissa) - (int64_t)zero_point;
  const float value = (float)shifted * scale;
  uint32_t bits;
  mlf_number v;
  memcpy(&bits, &value, sizeof(bits));
  decode_float(bits, 32u, 23u, &v);
  return v;
}
