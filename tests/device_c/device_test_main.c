/*
 * device_test_main.c — a host_driven test firmware over the fake runtime:
 *   model 0 "adder", model 1 "echo" (uint8[--echo-bytes]), model 2 "broken" (init failed).
 * Options: --echo-bytes N, --max-payload N, --board NAME, --idle-ms N, --noise (garbage
 * before the boot HELLO), --no-announce (no boot HELLO: the host must ask), --mute (read,
 * never answer).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_runtime.h"
#include "mlf_device.h"
#include "mlf_platform.h"

#define MAX_ECHO_BYTES (64u << 20)

static uint8_t echo_in[MAX_ECHO_BYTES];
static uint8_t echo_out[MAX_ECHO_BYTES];
static uint8_t rx_buffer[MLF_FRAME_BUFFER_BYTES(MLF_FRAME_MAX_PAYLOAD)];

int main(int argc, char** argv) {
  size_t echo_bytes = 1024;
  uint32_t max_payload = 16384;
  const char* board = "host";
  int noise = 0, announce = 1, mute = 0;
  uint32_t idle_ms = 200;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--echo-bytes") && i + 1 < argc) {
      echo_bytes = (size_t)strtoul(argv[++i], NULL, 0);
    } else if (!strcmp(argv[i], "--max-payload") && i + 1 < argc) {
      max_payload = (uint32_t)strtoul(argv[++i], NULL, 0);
    } else if (!strcmp(argv[i], "--board") && i + 1 < argc) {
      board = argv[++i];
    } else if (!strcmp(argv[i], "--idle-ms") && i + 1 < argc) {
      idle_ms = (uint32_t)strtoul(argv[++i], NULL, 0);
    } else if (!strcmp(argv[i], "--noise")) {
      noise = 1;
    } else if (!strcmp(argv[i], "--no-announce")) {
      announce = 0;
    } else if (!strcmp(argv[i], "--mute")) {
      mute = 1;
    } else {
      fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (echo_bytes > MAX_ECHO_BYTES) return 2;
  mlf_platform_init();

  static fake_model adder, echo, broken;
  fake_model_adder(&adder);
  fake_model_echo(&echo, echo_in, echo_out, echo_bytes);
  fake_model_adder(&broken);
  broken.ex.ready = 0;
  broken.ex.error.status = MLF_ERR_MISSING_FUNCTION;
  broken.ex.error.why = 8; /* MLF_WHY_MISSING_FUNCTION: the host words it */
  broken.ex.error.subject = "tvmgen_default_fused_nn_conv2d";
  broken.ex.error.subject_len = 30;
  static mlf_workspace workspace;
  const mlf_device_model models[] = {
      {"adder", &adder.ex, NULL, MLF_OK, 0},
      {"echo", &echo.ex, &workspace, MLF_OK, 0},
      {"broken", &broken.ex, NULL, MLF_ERR_MISSING_FUNCTION, 0},
  };
  const mlf_device_config config = {
      models, 3, board, "host_driven", rx_buffer, sizeof(rx_buffer), max_payload, idle_ms};
  if (mute) {
    uint8_t sink[256];
    while (mlf_platform_read(sink, sizeof(sink)) > 0) {
    }
    return 0;
  }
  mlf_device dev;
  if (mlf_device_init(&dev, &config) != 0) return MLF_DEVICE_EXIT_BAD_CONFIG;
  if (noise) {
    static const uint8_t garbage[] = "booting...\r\n\xA5\x5A\x81\x00\xFF\xFF junk \xA5";
    mlf_platform_write(garbage, sizeof(garbage) - 1);
  }
  if (announce) mlf_device_announce(&dev);
  for (;;) {
    int result = mlf_device_receive(&dev);
    if (result < 0) mlf_platform_exit(0);
    if (result > 0) mlf_platform_exit(mlf_device_exit_status(&dev));
  }
}
