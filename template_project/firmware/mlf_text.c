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

void mlf_text_u64(mlf_text* out, uint64_t v) {
  char digits[20];
  size_t n = 0;
  do {
    digits[n++] = (char)('0' + v % 10u);
    v /= 10u;
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

/* 10^k for 0 <= k <= 308 (exact up to 10^22; a few ulps off beyond, far below the 9 digits
 * printed). */
static double power_of_ten(int k) {
  double p = 1.0;
  while (k-- > 0) p *= 10.0;
  return p;
}

#define SIGNIFICANT 9
#define LARGEST_DOUBLE 1.7976931348623157e308

void mlf_text_number(mlf_text* out, double v) {
  if (v != v) {
    mlf_text_str(out, "nan");
    return;
  }
  uint64_t bits;
  memcpy(&bits, &v, sizeof(bits));
  if (bits >> 63) { /* negative, -0.0 included */
    mlf_text_char(out, '-');
    v = -v;
  }
  if (v > LARGEST_DOUBLE) {
    mlf_text_str(out, "inf");
    return;
  }
  if (v == 0) {
    mlf_text_str(out, "0.0");
    return;
  }
  /* v = scaled * 10^exponent with 1 <= scaled < 10 (up to rounding). */
  int exponent = 0;
  if (v < 1e-290) { /* subnormal doubles: bring them into range first */
    v *= 1e100;
    exponent = -100;
  }
  double scaled;
  if (v >= 1.0) {
    int e = 0;
    double p = 1.0;
    while (e < 308 && v >= p * 10.0) {
      p *= 10.0;
      ++e;
    }
    scaled = v / p;
    exponent += e;
  } else {
    int e = 0;
    while (e < 308 && v * power_of_ten(e) < 1.0) ++e;
    scaled = v * power_of_ten(e);
    exponent -= e;
  }
  uint64_t digits = (uint64_t)(scaled * 1e8 + 0.5);
  if (digits >= 1000000000u) {
    digits = (digits + 5u) / 10u;
    ++exponent;
  } else if (digits < 100000000u) {
    digits = (uint64_t)(scaled * 1e9 + 0.5);
    --exponent;
  }
  char text[SIGNIFICANT];
  for (int i = SIGNIFICANT - 1; i >= 0; --i) {
    text[i] = (char)('0' + digits % 10u);
    digits /= 10u;
  }
  int count = SIGNIFICANT;
  while (count > 1 && text[count - 1] == '0') --count;
  if (exponent >= -5 && exponent < SIGNIFICANT) {
    if (exponent < 0) {
      mlf_text_str(out, "0.");
      for (int i = -1; i > exponent; --i) mlf_text_char(out, '0');
      for (int i = 0; i < count; ++i) mlf_text_char(out, text[i]);
      return;
    }
    for (int i = 0; i <= exponent; ++i) mlf_text_char(out, i < count ? text[i] : '0');
    mlf_text_char(out, '.');
    if (count > exponent + 1) {
      for (int i = exponent + 1; i < count; ++i) mlf_text_char(out, text[i]);
    } else {
      mlf_text_char(out, '0'); /* 3.0: a float, whole or not */
    }
    return;
  }
  mlf_text_char(out, text[0]);
  if (count > 1) {
    mlf_text_char(out, '.');
    for (int i = 1; i < count; ++i) mlf_text_char(out, text[i]);
  }
  mlf_text_char(out, 'e');
  mlf_text_char(out, exponent < 0 ? '-' : '+');
  if (exponent > -10 && exponent < 10) mlf_text_char(out, '0');
  mlf_text_i64(out, exponent < 0 ? -(int64_t)exponent : (int64_t)exponent);
}

/* ---- tensor elements ----------------------------------------------------------------- */

static double half_to_double(uint16_t h) {
  int exponent = (h >> 10) & 0x1F;
  double mantissa = (double)(h & 0x3FF);
  double value;
  if (exponent == 0) {
    value = mantissa / 1024.0 / 16384.0; /* subnormal: m * 2^-24 */
  } else if (exponent == 31) {
    value = mantissa != 0 ? 0.0 / 0.0 : 1.0 / 0.0;
  } else {
    value = 1.0 + mantissa / 1024.0;
    for (int e = exponent - 15; e > 0; --e) value *= 2.0;
    for (int e = exponent - 15; e < 0; ++e) value *= 0.5;
  }
  return (h & 0x8000u) ? -value : value;
}

int mlf_text_element(const uint8_t* data, DLDataType t, size_t i, double* value) {
  const size_t width = (t.bits + 7u) / 8u;
  if (t.lanes != 1 || (width != 1 && width != 2 && width != 4 && width != 8)) return 0;
  union {
    uint8_t u8;
    int8_t i8;
    uint16_t u16;
    int16_t i16;
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
  } v;
  memcpy(&v, data + i * width, width); /* the device's own byte order */
  const int whole = t.bits == 8 * width;
  if (t.code == kDLInt && whole) {
    *value = width == 1 ? v.i8 : width == 2 ? v.i16 : width == 4 ? v.i32 : (double)v.i64;
    return 1;
  }
  if (t.code == kDLUInt && (whole || t.bits == 1)) {
    *value = width == 1 ? v.u8 : width == 2 ? v.u16 : width == 4 ? v.u32 : (double)v.u64;
    return 1;
  }
  if (t.code == kDLFloat && whole && width >= 2) {
    *value = width == 2 ? half_to_double(v.u16) : width == 4 ? v.f32 : v.f64;
    return 1;
  }
  if (t.code == kDLBfloat && t.bits == 16) {
    uint32_t bits = (uint32_t)v.u16 << 16;
    float f;
    memcpy(&f, &bits, sizeof(f));
    *value = f;
    return 1;
  }
  return 0;
}
