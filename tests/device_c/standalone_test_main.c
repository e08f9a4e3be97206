/*
 * standalone_test_main.c — a standalone test firmware over the fake runtime.
 *   model 0 "adder": two samples with expected outputs (--mismatch spoils one);
 *   model 1 "echo" (uint8[40]): one sample, no expectations (--fail makes it fail as an
 *   operator); --broken adds model 2 whose init failed.
 */
#include <string.h>

#include "fake_runtime.h"
#include "mlf_platform.h"
#include "mlf_standalone.h"

int main(int argc, char** argv) {
  int mismatch = 0, fail = 0, broken_model = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--mismatch")) mismatch = 1;
    if (!strcmp(argv[i], "--fail")) fail = 1;
    if (!strcmp(argv[i], "--broken")) broken_model = 1;
  }
  mlf_platform_init();
  static fake_model adder, echo, broken;
  static uint8_t echo_in[40], echo_out[40];
  fake_model_adder(&adder);
  fake_model_echo(&echo, echo_in, echo_out, sizeof(echo_in));
  fake_model_adder(&broken);
  broken.ex.error.status = MLF_ERR_MISSING_FUNCTION;
  broken.ex.error.subject = "tvmgen_default_fused_add";
  broken.ex.error.subject_len = 24;

  static const float x0[6] = {0, 1, 2, 3, 4, 5};
  static const int8_t y0[4] = {1, 2, 3, -4};
  static const float out0[6] = {1, 3, 5, 7, 9, 11.000001f}; /* within rtol */
  static const int32_t sum0[1] = {2};
  static const float x1[6] = {-1, -0.5f, 0, 0.5f, 1, 100};
  static const int8_t y1[4] = {127, 127, 127, 127};
  static float out1[6] = {-1, 0, 1, 2, 3, 201};
  static const int32_t sum1[1] = {508};
  if (mismatch) out1[5] = 202;
  static uint8_t echo_data[40];
  for (int i = 0; i < 40; ++i) echo_data[i] = (uint8_t)(i * 7);
  if (fail) echo_data[0] = 0xFF;

  static const void* const s0_in[] = {x0, y0};
  static const void* const s0_exp[] = {out0, sum0};
  static const void* const s1_in[] = {x1, y1};
  static const void* const s1_exp[] = {out1, sum1};
  static const void* const e_in[] = {echo_data};
  static const mlf_standalone_sample adder_samples[] = {{s0_in, s0_exp}, {s1_in, s1_exp}};
  static const mlf_standalone_sample echo_samples[] = {{e_in, NULL}};
  static mlf_workspace workspace;
  const mlf_standalone_model models[] = {
      {"adder", &adder.ex, NULL, MLF_OK, adder_samples, 2},
      {"echo", &echo.ex, &workspace, MLF_OK, echo_samples, 1},
      {"broken", &broken.ex, NULL, MLF_ERR_MISSING_FUNCTION, NULL, 0},
  };
  const mlf_standalone_config config = {
      .models = models,
      .num_models = broken_model ? 3u : 2u,
      .board = "host",
      .rtol = 1e-5f,
      .atol = 1e-6f,
      .max_print_bytes = 64,
  };
  mlf_platform_exit(mlf_standalone_run(&config));
}
