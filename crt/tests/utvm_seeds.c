/*
 * utvm_seeds.c — seeds for fuzz_utvm (format: fuzz_utvm.h): the traffic of TVM's host flows
 * (system library, function lookup, allocations and copies, operator calls, the time
 * evaluator, the AOT and graph executor modules), one seed per flow, plus raw framed packets.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_utvm.h"
#include "utvm_support.h"

/* Handles as the server gives them out (mlf_utvm.h): kind << 32 | low. */
#define GLOBAL(i) ((1ull << 32) | (i))
#define SYSTEM_LIB_MODULE (2ull << 32)
#define AOT_MODULE (2ull << 32 | 2u)
#define LIBFUNC(slot) ((3ull << 32) | (slot))
#define TIMER (4ull << 32 | 1u)
#define METHOD(m, k) ((5ull << 32) | ((m) << 8) | (k))
/* The first graph executor of a session: generation 1, slot 0. */
#define GRAPH_MODULE ((7ull << 32) | (1u << 16))
#define GRAPH_METHOD(k) ((8ull << 32) | (1u << 16) | (k))

typedef struct {
  utvm_msg all;    /* the seed */
  utvm_msg record; /* the record being written */
} seed;

static void begin(seed* s, uint32_t code) {
  s->record.len = 0;
  msg_u(&s->record, code, 4);
}

static void end(seed* s) {
  msg_u(&s->all, s->record.len, 2);
  msg_bytes(&s->all, s->record.bytes, s->record.len);
}

static void address(seed* s, uint8_t unit) {
  msg_bytes(&s->record, FUZZ_ADDRESS_MAGIC, FUZZ_ADDRESS_MAGIC_LEN);
  msg_u(&s->record, unit, 1);
}

static void call(seed* s, uint64_t fn, uint32_t num, const char* codes) {
  begin(s, 3);
  msg_u(&s->record, fn, 8);
  msg_u(&s->record, num, 4);
  for (uint32_t i = 0; i < num; ++i) msg_u(&s->record, (uint32_t)(uint8_t)codes[i], 4);
}

static void tensor_at(seed* s, uint8_t unit, int64_t n) {
  address(s, unit);
  msg_u(&s->record, 1, 4);
  msg_u(&s->record, 0, 4);
  msg_u(&s->record, 1, 4);
  msg_u(&s->record, 2 | 32 << 8 | 1 << 16, 4);
  msg_u(&s->record, (uint64_t)n, 8);
  msg_u(&s->record, 0, 8);
}

static void alloc(seed* s, uint64_t nbytes) {
  begin(s, 13);
  msg_u(&s->record, 4, 4);
  msg_bytes(&s->record, "\x06\0\0\0\0\0\0\0\0\0\0\0\x05\0\0\0", 16);
  msg_u(&s->record, 1, 4);
  msg_u(&s->record, 0, 4);
  msg_u(&s->record, nbytes, 8);
  msg_u(&s->record, 64, 8);
  msg_u(&s->record, 2 | 32 << 8 | 1 << 16, 8);
  end(s);
}

static void get_function(seed* s, uint64_t module, const char* name) {
  call(s, GLOBAL(1), 3, "\x09\x0b\x00");
  msg_u(&s->record, module, 8);
  msg_str(&s->record, name);
  msg_u(&s->record, 1, 8);
  end(s);
}

static void copy(seed* s, int to_remote, uint8_t unit, int64_t n) {
  begin(s, to_remote ? 7 : 6);
  tensor_at(s, unit, n);
  msg_u(&s->record, (uint64_t)n * 4, 8);
  for (int64_t i = 0; to_remote && i < n * 4; ++i) msg_u(&s->record, (uint64_t)i, 1);
  end(s);
}

/* RPCTimeEvaluator(module, name, 1, 0, number, repeat, 0, 100, 0, 1, 0, ""). */
static void time_evaluator(seed* s, uint64_t module, const char* name, uint64_t number,
                           uint64_t repeat) {
  call(s, GLOBAL(3), 12, "\x09\x0b\0\0\0\0\0\0\0\0\0\x0b");
  msg_u(&s->record, module, 8);
  msg_str(&s->record, name);
  const uint64_t ints[9] = {1, 0, number, repeat, 0, 100, 0, 1, 0};
  for (int i = 0; i < 9; ++i) msg_u(&s->record, ints[i], 8);
  msg_str(&s->record, "");
  end(s);
}

static int write_file(const char* dir, int n, const void* data, size_t len) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/utvm/seed%02d", dir, n);
  FILE* f = fopen(path, "wb");
  if (f == NULL || fwrite(data, 1, len, f) != len) return 1;
  fclose(f);
  return 0;
}

int utvm_write_seeds(const char* dir) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/utvm", dir);
  mkdir(path, 0777);
  static seed s;
  int rc = 0, n = 0;

  /* The graph flow: SystemLib, lookups, allocations, copies, calls, frees. */
  s.all.len = 0;
  msg_u(&s.all, 0, 1);
  begin(&s, 9);
  msg_u(&s.record, 1, 4);
  msg_u(&s.record, 11, 4);
  msg_str(&s.record, "runtime.SystemLib");
  end(&s);
  call(&s, GLOBAL(0), 0, "");
  end(&s);
  get_function(&s, SYSTEM_LIB_MODULE, "_lookup_linked_param");
  get_function(&s, SYSTEM_LIB_MODULE, "copy");
  alloc(&s, 64);
  alloc(&s, 64);
  copy(&s, 1, 0, 16);
  call(&s, LIBFUNC(0), 2, "\x07\x07");
  tensor_at(&s, 0, 16);
  tensor_at(&s, 1, 16);
  end(&s);
  copy(&s, 0, 1, 16);
  begin(&s, 15);
  msg_u(&s.record, 2, 4);
  msg_bytes(&s.record, "\x06\0\0\0\x03\0\0\0\x01\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 24);
  end(&s);
  begin(&s, 14);
  msg_u(&s.record, 2, 4);
  msg_bytes(&s.record, "\x06\0\0\0\x03\0\0\0\x01\0\0\0\0\0\0\0", 16);
  address(&s, 1);
  end(&s);
  begin(&s, 10);
  msg_u(&s.record, 2, 4);
  msg_bytes(&s.record, "\x03\0\0\0\0\0\0\0", 8);
  msg_u(&s.record, LIBFUNC(0), 8);
  msg_u(&s.record, 10, 8);
  end(&s);
  rc |= write_file(dir, n++, s.all.bytes, s.all.len);

  /* The time evaluator on the library's copy and random_fill. */
  s.all.len = 0;
  msg_u(&s.all, 8, 1);
  alloc(&s, 128);
  time_evaluator(&s, SYSTEM_LIB_MODULE, "copy", 2, 3);
  call(&s, TIMER, 2, "\x07\x07");
  tensor_at(&s, 0, 8);
  tensor_at(&s, 0, 8);
  end(&s);
  call(&s, GLOBAL(4), 1, "\x07");
  tensor_at(&s, 0, 32);
  end(&s);
  call(&s, GLOBAL(2), 0, "");
  end(&s);
  rc |= write_file(dir, n++, s.all.bytes, s.all.len);

  /* The AOT executor module of model 1 ("basic"): create, counts, names, arrays, run. */
  s.all.len = 0;
  msg_u(&s.all, 0, 1);
  call(&s, GLOBAL(5), 3, "\x09\x06\x0b");
  msg_u(&s.record, SYSTEM_LIB_MODULE, 8);
  msg_u(&s.record, 1, 4);
  msg_u(&s.record, 0, 4);
  msg_str(&s.record, "basic");
  end(&s);
  static const char* const methods[8] = {"set_input",       "run",
                                         "get_output",      "get_input",
                                         "get_num_outputs", "get_input_index",
                                         "get_num_inputs",  "get_input_name"};
  for (int i = 0; i < 8; ++i) get_function(&s, AOT_MODULE, methods[i]);
  call(&s, METHOD(1u, 3u), 1, "\x00");
  msg_u(&s.record, 0, 8);
  end(&s);
  call(&s, METHOD(1u, 3u), 1, "\x0b");
  msg_str(&s.record, "p0");
  end(&s);
  call(&s, METHOD(1u, 7u), 1, "\x00");
  msg_u(&s.record, 1, 8);
  end(&s);
  call(&s, METHOD(1u, 1u), 0, "");
  end(&s);
  call(&s, METHOD(1u, 2u), 1, "\x00");
  msg_u(&s.record, 2, 8);
  end(&s);
  time_evaluator(&s, AOT_MODULE, "run", 3, 2);
  call(&s, TIMER, 0, "");
  end(&s);
  rc |= write_file(dir, n++, s.all.bytes, s.all.len);

  /* tvm.graph_executor.create over the fuzzer's library ("copy", signed: two tensors of 16
   * bytes) and every function of the module, the time evaluator of its run, two frees. */
  s.all.len = 0;
  msg_u(&s.all, 8, 1);
  alloc(&s, 64);
  call(&s, GLOBAL(6), 4, "\x0b\x09\x00\x00");
  msg_str(&s.record,
          "{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", \"inputs\": []}, {\"op\": "
          "\"tvm_op\", \"name\": \"c\", \"attrs\": {\"func_name\": \"copy\", \"num_inputs\": "
          "\"1\", \"num_outputs\": \"1\"}, \"inputs\": [[0, 0, 0]]}], \"arg_nodes\": [0], "
          "\"heads\": [[1, 0, 0]], \"attrs\": {\"dltype\": [\"list_str\", [\"float32\", "
          "\"float32\"]], \"storage_id\": [\"list_int\", [0, 1]], \"shape\": [\"list_shape\", "
          "[[4], [4]]]}, \"node_row_ptr\": [0, 1, 2]}");
  msg_u(&s.record, SYSTEM_LIB_MODULE, 8);
  msg_u(&s.record, 1, 8);
  msg_u(&s.record, 0, 8);
  end(&s);
  static const char* const graph_methods[10] = {"set_input",       "run",
                                                "get_output",      "get_input",
                                                "get_num_outputs", "get_input_index",
                                                "get_num_inputs",  "load_params",
                                                "get_input_info",  "share_params"};
  for (int i = 0; i < 10; ++i) get_function(&s, GRAPH_MODULE, graph_methods[i]);
  copy(&s, 1, 0, 4);
  call(&s, GRAPH_METHOD(0u), 2, "\x0b\x07");
  msg_str(&s.record, "x");
  tensor_at(&s, 0, 4);
  end(&s);
  call(&s, GRAPH_METHOD(3u), 1, "\x00");
  msg_u(&s.record, 0, 8);
  end(&s);
  call(&s, GRAPH_METHOD(1u), 0, "");
  end(&s);
  call(&s, GRAPH_METHOD(2u), 2, "\x00\x07");
  msg_u(&s.record, 0, 8);
  tensor_at(&s, 0, 4);
  end(&s);
  call(&s, GRAPH_METHOD(5u), 1, "\x0b");
  msg_str(&s.record, "x");
  end(&s);
  call(&s, GRAPH_METHOD(7u), 1, "\x0c");
  msg_str(&s.record, "not params");
  end(&s);
  time_evaluator(&s, GRAPH_MODULE, "run", 2, 2);
  call(&s, TIMER, 0, "");
  end(&s);
  for (int i = 0; i < 2; ++i) {
    begin(&s, 10);
    msg_u(&s.record, 2, 4);
    msg_bytes(&s.record, "\x03\0\0\0\0\0\0\0", 8);
    msg_u(&s.record, GRAPH_MODULE, 8);
    msg_u(&s.record, 9, 8);
    end(&s);
  }
  call(&s, GRAPH_METHOD(1u), 0, "");
  end(&s);
  rc |= write_file(dir, n++, s.all.bytes, s.all.len);

  /* Raw: the worked example's handshake and GetGlobalFunc, framed. */
  static const uint8_t raw[] = {
      0x01, 0xfe, 0xff, 0xfd, 3,    0,    0,    0,   0,    0,    2,    0x66, 0x77, 0xff,
      0xfd, 4,    0,    0,    0,    0x43, 0,    0,   1,    0x6b, 0x2c, 0xff, 0xfd, 0x30,
      0,    0,    0,    0x43, 0x22, 0x10, 0x25, 0,   0,    0,    0,    0,    0,    0,
      9,    0,    0,    0,    1,    0,    0,    0,   0x0b, 0,    0,    0,    0x11, 0,
      0,    0,    0,    0,    0,    0,    'r',  'u', 'n',  't',  'i',  'm',  'e',  '.',
      'S',  'y',  's',  't',  'e',  'm',  'L',  'i', 'b',  0x61, 0xd9};
  rc |= write_file(dir, n++, raw, sizeof(raw));
  return rc;
}
