/*
 * text_number_main.c — for tests/test_mlperf_protocol.py: prints, one per line, every float32
 * read from stdin (raw little-endian words) with mlf_text_number(); with the argument
 * "dequantize", reads (int32 q, int32 zero_point, float32 scale) records instead and prints
 * mlf_number_dequantized() of each; with "int32", prints int32 words. An element with no
 * reading prints as "none".
 */
#include <stdio.h>
#include <string.h>

#include "mlf_platform.h"
#include "mlf_text.h"

void mlf_platform_write(const uint8_t* buf, size_t n) { fwrite(buf, 1, n, stdout); }

int main(int argc, char** argv) {
  mlf_text out;
  memset(&out, 0, sizeof(out));
  const int dequantize = argc > 1 && strcmp(argv[1], "dequantize") == 0;
  const int integers = argc > 1 && strcmp(argv[1], "int32") == 0;
  const DLDataType float32 = {kDLFloat, 32, 1}, int32 = {kDLInt, 32, 1};
  uint8_t record[12];
  const size_t size = dequantize ? 12u : 4u;
  while (fread(record, size, 1, stdin) == 1) {
    mlf_number value;
    int read = 1;
    if (dequantize) {
      int32_t zero_point;
      float scale;
      memcpy(&zero_point, record + 4, sizeof(zero_point));
      memcpy(&scale, record + 8, sizeof(scale));
      mlf_text_element(record, int32, 0, &value);
      value = mlf_number_dequantized(&value, zero_point, scale);
    } else {
      read = mlf_text_element(record, integers ? int32 : float32, 0, &value);
    }
    if (read) {
      mlf_text_number(&out, &value);
    } else {
      mlf_text_str(&out, "none");
    }
    mlf_text_char(&out, '\n');
  }
  mlf_text_flush(&out);
  return 0;
}
