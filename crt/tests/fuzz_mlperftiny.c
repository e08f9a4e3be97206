/*
 * fuzz_mlperftiny.c — libFuzzer target: the MLPerf Tiny command interpreter
 * (template_project/firmware/mlf_mlperftiny.c) fed arbitrary bytes, over the real runtime and
 * small models whose operators count their runs.
 *
 * The first byte picks the setting: the model (int8 copy, float32 doubling, two int8 inputs
 * added, an operator that fails), dequantized results, energy mode with or without a
 * timestamp pin, a model that failed to initialise, an input buffer of the wrong size. The rest
 * is what arrives on the console link, in chunks whose sizes the next bytes choose.
 *
 * Besides memory safety (ASan, UBSan) it checks what the firmware writes: every line ends with
 * "\r\n" and holds printable ASCII only; every line is an "m-..." message or an "e-[...]"
 * error without brackets inside; and there is exactly one m-ready at start-up plus one per '%'
 * received — every command is answered, whatever it was.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlf_mlperftiny.h"
#include "mlf_platform.h"
#include "mlf_runtime.h"

#define RUN_BUDGET 64 /* operator calls per input: `infer 4000000000` must end */

static int g_calls;

static int over_budget(void) { return ++g_calls > RUN_BUDGET; }

static size_t numel(const DLTensor* t) {
  size_t n = 1;
  for (int32_t d = 0; d < t->ndim; ++d) n *= (size_t)t->shape[d];
  return n;
}

#define TENSOR(i) ((DLTensor*)args[i].v_handle)

static int32_t op_copy8(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                        void* resource) {
  (void)codes, (void)ret, (void)ret_code, (void)resource;
  if (num_args != 2 || over_budget()) return -1;
  memcpy(TENSOR(1)->data, TENSOR(0)->data, numel(TENSOR(1)));
  return 0;
}

static int32_t op_double(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                         void* resource) {
  (void)codes, (void)ret, (void)ret_code, (void)resource;
  if (num_args != 2 || over_budget()) return -1;
  const float* in = (const float*)TENSOR(0)->data;
  float* out = (float*)TENSOR(1)->data;
  for (size_t i = 0; i < numel(TENSOR(1)); ++i) out[i] = 2.0f * in[i];
  return 0;
}

static int32_t op_add8(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                       void* resource) {
  (void)codes, (void)ret, (void)ret_code, (void)resource;
  if (num_args != 3 || over_budget()) return -1;
  const int8_t* a = (const int8_t*)TENSOR(0)->data;
  const int8_t* b = (const int8_t*)TENSOR(1)->data;
  int8_t* out = (int8_t*)TENSOR(2)->data;
  for (size_t i = 0; i < numel(TENSOR(2)); ++i) out[i] = (int8_t)(a[i] + b[i]);
  return 0;
}

static int32_t op_fail(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                       void* resource) {
  (void)args, (void)codes, (void)num_args, (void)ret, (void)ret_code, (void)resource;
  return -1;
}

static const char kNames[] = "\004\000copy8\000double\000add8\000fail\000";
static TVMBackendPackedCFunc const kFuncs[] = {
    (TVMBackendPackedCFunc)op_copy8,
    (TVMBackendPackedCFunc)op_double,
    (TVMBackendPackedCFunc)op_add8,
    (TVMBackendPackedCFunc)op_fail,
};
static const TVMFuncRegistry kRegistry = {kNames, kFuncs};
static const TVMModule kLib = {&kRegistry};

#define NODE(name) "{\"op\": \"null\", \"name\": \"" name "\", \"inputs\": []}"
#define CALL(func, n_in, inputs)                                                    \
  "{\"op\": \"tvm_op\", \"name\": \"" func "\", \"attrs\": {\"func_name\": \"" func \
  "\", "                                                                            \
  "\"num_inputs\": \"" #n_in                                                        \
  "\", \"num_outputs\": \"1\", \"flatten_data\": \"0\"}, \"inputs\": " inputs "}"
#define ONE_INPUT(func, dtype, shape) \
  "{\"nodes\": [" NODE("x") ", " CALL(func, 1, "[[0, 0, 0]]") "], \"arg_nodes\": [0], "        \
  "\"heads\": [[1, 0, 0]], \"attrs\": {\"dltype\": [\"list_str\", [\"" dtype "\", \"" dtype \
  "\"]], \"storage_id\": [\"list_int\", [0, 1]], \"shape\": [\"list_shape\", [" shape ", "  \
  shape "]]}, \"node_row_ptr\": [0, 1, 2]}"

static const char* const kModels[] = {
    ONE_INPUT("copy8", "int8", "[1, 5]"),
    ONE_INPUT("double", "float32", "[2, 2]"),
    "{\"nodes\": [" NODE("x") ", " NODE("y") ", " CALL("add8", 2, "[[0, 0, 0], [1, 0, 0]]") "], "
    "\"arg_nodes\": [0, 1], \"heads\": [[2, 0, 0]], \"attrs\": {\"dltype\": [\"list_str\", "
    "[\"int8\", \"int8\", \"int8\"]], \"storage_id\": [\"list_int\", [0, 1, 2]], \"shape\": "
    "[\"list_shape\", [[3], [3], [3]]]}, \"node_row_ptr\": [0, 1, 2, 3]}",
    ONE_INPUT("fail", "int8", "[2]"),
};
#define NUM_MODELS (sizeof(kModels) / sizeof(kModels[0]))

typedef struct {
  mlf_executor executor;
  void* tables;
  void* state;
  void* arena;
  size_t input_bytes;
  uint8_t* buffer;
  int ready;
} model;

static model g_models[NUM_MODELS];

static void set_up(model* m, const char* json) {
  const mlf_graph* graph = NULL;
  size_t bytes = 0, arena_bytes = 0;
  size_t len = strlen(json);
  if (mlf_graph_measure_json(json, len, &bytes, NULL) != MLF_OK) abort();
  m->tables = malloc(bytes);
  if (mlf_graph_parse_json(json, len, m->tables, bytes, &graph, NULL) != MLF_OK) abort();
  if (mlf_executor_arena_bytes(graph, NULL, 0, 0, &arena_bytes) != MLF_OK) abort();
  m->state = malloc(mlf_executor_state_bytes(graph));
  m->arena = malloc(arena_bytes);
  if (mlf_executor_init(&m->executor, graph, &kLib, NULL, 0, m->state,
                        mlf_executor_state_bytes(graph), m->arena, arena_bytes) != MLF_OK) {
    abort();
  }
  for (uint32_t i = 0; i < mlf_executor_num_inputs(&m->executor); ++i) {
    mlf_tensor_info info;
    mlf_executor_input_info(&m->executor, i, &info);
    m->input_bytes += info.nbytes;
  }
  m->buffer = malloc(m->input_bytes + 1);
  m->ready = 1;
}

/* ---- the platform: output captured and checked, a clock, a timestamp pin ---------------- */

static char g_out[1 << 20];
static size_t g_out_len;
static int g_has_pin;
static uint64_t g_ticks;

void mlf_platform_write(const uint8_t* buf, size_t n) {
  if (n > sizeof(g_out) - g_out_len) n = sizeof(g_out) - g_out_len;
  memcpy(g_out + g_out_len, buf, n);
  g_out_len += n;
}

size_t mlf_platform_read(uint8_t* buf, size_t max) {
  (void)buf, (void)max;
  return 0;
}

uint64_t mlf_platform_ticks(void) { return g_ticks += 12345u; }
uint64_t mlf_platform_tick_hz(void) { return 25000000u; }
int mlf_platform_timestamp_pulse(void) { return g_has_pin; }

static void fail(const char* why, size_t at) {
  fprintf(stderr, "fuzz_mlperftiny: %s at output byte %zu\n%.*s\n", why, at, (int)g_out_len, g_out);
  abort();
}

static size_t check_output(void) {
  size_t ready = 0, start = 0;
  for (size_t i = 0; i < g_out_len; ++i) {
    char c = g_out[i];
    if (c == '\r') {
      if (i + 1 >= g_out_len || g_out[i + 1] != '\n') fail("\\r without \\n", i);
      size_t len = i - start;
      const char* line = g_out + start;
      if (len < 3 || (memcmp(line, "m-", 2) != 0 && memcmp(line, "e-[", 3) != 0)) {
        fail("a line that is neither m- nor e-[", start);
      }
      if (line[0] == 'e') {
        if (line[len - 1] != ']') fail("an error line not ending with ]", start);
        for (size_t k = 3; k + 1 < len; ++k) {
          if (line[k] == '[' || line[k] == ']') fail("a bracket inside an error", start + k);
        }
      }
      if (len == 7 && memcmp(line, "m-ready", 7) == 0) ++ready;
      start = i + 2;
      ++i;
    } else if (c == '\n' || (unsigned char)c < 0x20 || (unsigned char)c > 0x7E) {
      fail("a control or non-ASCII character", i);
    }
  }
  if (start != g_out_len) fail("output not ending with \\r\\n", start);
  return ready;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t setting = data[0];
  model* m = &g_models[setting % NUM_MODELS];
  if (!m->ready) set_up(m, kModels[setting % NUM_MODELS]);
  g_out_len = 0;
  g_calls = 0;
  g_has_pin = (setting >> 4) & 1;
  mlf_mlperftiny_config config = {
      .name = "fuzz",
      .profile = "profile",
      .model = "kws01",
      .executor = &m->executor,
      .workspace = NULL,
      .init_status = (setting & 0x20) ? MLF_ERR_GRAPH : MLF_OK,
      .buffer = m->buffer,
      .buffer_size = m->input_bytes + ((setting & 0x40) ? 1u : 0u),
      .dequantize = (setting >> 2) & 1,
      .output_scale = 0.5f,
      .output_zero_point = -3,
      .energy_mode = (setting >> 3) & 1,
  };
  mlf_mlperftiny dev;
  mlf_mlperftiny_start(&dev, &config);
  size_t terminators = 0;
  for (size_t i = 1; i < size; ++i) terminators += data[i] == MLF_MLPERFTINY_TERMINATOR;
  /* Chunks of 1..8 bytes, sized by the top bits of the setting byte. */
  size_t chunk = (size_t)(setting >> 7) * 7u + 1u;
  for (size_t at = 1; at < size; at += chunk) {
    size_t n = size - at < chunk ? size - at : chunk;
    mlf_mlperftiny_feed(&dev, data + at, n);
  }
  if (check_output() != terminators + 1) fail("not one m-ready per command", 0);
  return 0;
}
