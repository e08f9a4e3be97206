/*
 * mlf_text.h — text lines on the console link for the firmware loops that print (standalone,
 * mlperftiny): a small line buffer with hand-written number formatting (printf would drag a
 * large, possibly allocating formatter into small images), and tensor elements read as
 * numbers.
 */
#ifndef MLF_TEXT_H_
#define MLF_TEXT_H_

#include <stddef.h>
#include <stdint.h>

#include "mlf_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Text on its way to mlf_platform_write(): flushed when full and by mlf_text_flush(). */
typedef struct {
  char line[128];
  size_t fill;
} mlf_text;

void mlf_text_flush(mlf_text* out);
/* strnlen and memcmp's jobs, so that the firmware loops (this one, the device protocol's,
 * the standalone runner's) link no libc beyond memcpy/memset. */
size_t mlf_text_length(const char* s, size_t limit);
int mlf_bytes_equal(const void* a, const void* b, size_t n);
void mlf_text_char(mlf_text* out, char c);
void mlf_text_str(mlf_text* out, const char* s);
/* Text that must stay on one line and inside one field: control characters become '?'. */
void mlf_text_safe(mlf_text* out, const char* s);
void mlf_text_u64(mlf_text* out, uint64_t v);
void mlf_text_i64(mlf_text* out, int64_t v);
void mlf_text_hex_byte(mlf_text* out, uint8_t b);
/* n bytes of s as one field of a line that brackets its fields (mlperftiny's e-[...], the
 * failures both loops print): printable ASCII only, '[' and ']' shown as '(' and ')'. */
void mlf_text_field(mlf_text* out, const char* s, size_t n);
/* A runtime failure as numbers the host words (transport/reasons.py explain()), so that no
 * status names or reason texts are linked: "error <status>[: #<why>][ '<subject>'][ at node
 * <n>][ at byte <offset>]", the details when `err` records that status. */
void mlf_text_error(mlf_text* out, mlf_status status, const mlf_error* err);

/* n / d, the remainder in *rem: 64-bit division without libgcc's (700 bytes) on targets
 * with no 64-bit divide instruction. */
uint64_t mlf_text_divide(uint64_t n, uint32_t d, uint32_t* rem);

/* Whether floats are read and printed. The generator sets 0 for a firmware whose outputs are
 * all integers and are printed as such: the float decoding and formatting (about 700 bytes
 * on Cortex-M) are then left out, and a float element has no reading (mlf_text_element 0). */
#ifndef MLF_TEXT_FLOATS
#define MLF_TEXT_FLOATS 1
#endif

/* A number read exactly from a tensor element, with integer arithmetic only (no floating
 * point is linked for it): an integer, magnitude `mantissa`; or a binary float,
 * mantissa * 2^exponent; or an infinity or NaN. */
enum { MLF_NUMBER_INTEGER, MLF_NUMBER_FLOAT, MLF_NUMBER_INF, MLF_NUMBER_NAN };
typedef struct {
  uint64_t mantissa;
  int32_t exponent; /* floats only */
  uint8_t negative;
  uint8_t kind; /* MLF_NUMBER_* */
} mlf_number;

/* Element i of a tensor's data; 0 when the dtype has no such reading (vector lanes, widths
 * other than 1, 2, 4 or 8 bytes, floats when MLF_TEXT_FLOATS is 0). */
int mlf_text_element(const uint8_t* data, DLDataType t, size_t i, mlf_number* value);
/* < 0, 0 or > 0 as a is below, equal to or above b (neither a NaN). */
int mlf_number_compare(const mlf_number* a, const mlf_number* b);
/* float32(q - zero_point) * scale, in float32 arithmetic (the one place this file uses
 * floating point); |q| below 2^63. */
mlf_number mlf_number_dequantized(const mlf_number* q, int32_t zero_point, float scale);

/* An integer as such; a float with up to 9 significant digits (enough to read a float32 back
 * exactly), always written as a float: 0.25, -3.0, 0.0, 1.17549435e-38; nan, inf and -inf
 * as such. */
void mlf_text_number(mlf_text* out, const mlf_number* v);

#ifdef __cplusplus
}
#endif

#endif /* MLF_TEXT_H_ */
