/*
 * text_number_main.c — prints every float32 read from stdin (raw little-endian words) with
 * mlf_text_number(), one per line, for tests/test_mlperf_protocol.py.
 */
#include <stdio.h>
#include <string.h>

#include "mlf_platform.h"
#include "mlf_text.h"

void mlf_platform_write(const uint8_t* buf, size_t n) { fwrite(buf, 1, n, stdout); }

int main(void) {
  mlf_text out;
  memset(&out, 0, sizeof(out));
  float value;
  while (fread(&value, sizeof(value), 1, stdin) == 1) {
    mlf_text_number(&out, (double)value);
    mlf_text_char(&out, '\n');
  }
  mlf_text_flush(&out);
  return 0;
}
