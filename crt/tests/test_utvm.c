/*
 * test_utvm.c — the microTVM RPC server (template_project/firmware/mlf_utvm_*.c) against the
 * wire facts of ../shared/spec/microtvm-rpc.md: CRC and framing vectors, the worked example
 * of its section 5, every request kind, and recovery from what TVM's own device does not
 * survive (bad CRC, stale session, oversized packets, garbage between frames).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_graphs.h"
#include "test_util.h"
#include "utvm_support.h"

static utvm_device* g_dev;
static uint8_t g_reply[UTVM_OUT];

enum {
  CALL = 3,
  COPY_FROM = 6,
  COPY_TO = 7,
  GET_GLOBAL = 9,
  FREE_HANDLE = 10,
  ALLOC = 13,
  FREE_DATA = 14
};

static utvm_device* fresh(const mlf_utvm_model* models, uint32_t n) {
  memset(g_dev, 0, sizeof(*g_dev));
  CHECK_EQ_INT(utvm_device_start(g_dev, models, n, NULL), 0);
  CHECK_EQ_INT(utvm_handshake(g_dev, 0x43), 0);
  return g_dev;
}

static const mlf_utvm_model kLibOnly[] = {{.name = "default", .library = &g_test_lib}};

/* The reply's code (4 Return, 5 Exception, 8 CopyAck), or -1 without a reply. */
static long request(const utvm_msg* m) {
  long n = utvm_request(g_dev, m, g_reply, sizeof(g_reply));
  return n < 4 ? -1 : (long)utvm_le(g_reply, 4);
}

/* A CallFunc reply [0: type][wire: value]: the value, with its type checked. */
static uint64_t call_result(const utvm_msg* m, int type_code, int wire_code) {
  CHECK_EQ_INT(request(m), 4);
  CHECK_EQ_INT(utvm_le(g_reply + 4, 4), 2);
  CHECK_EQ_INT(utvm_le(g_reply + 8, 4), 0);
  CHECK_EQ_INT(utvm_le(g_reply + 12, 4), wire_code);
  CHECK_EQ_INT(utvm_le(g_reply + 16, 8), type_code);
  return wire_code == 4 ? 0 : utvm_le(g_reply + 24, 8);
}

static int is_exception(const utvm_msg* m, const char* text) {
  if (request(m) != 5) return 0;
  size_t len = (size_t)utvm_le(g_reply + 12, 8);
  if (text != NULL && (len != strlen(text) || memcmp(g_reply + 20, text, len) != 0)) {
    fprintf(stderr, "exception: %.*s\n", (int)len, (const char*)g_reply + 20);
  }
  return text == NULL || (len == strlen(text) && memcmp(g_reply + 20, text, len) == 0);
}

static uint64_t global(const char* name) {
  utvm_msg m = {.len = 0};
  msg_u(&m, GET_GLOBAL, 4);
  msg_u(&m, 1, 4);
  msg_u(&m, 11, 4);
  msg_str(&m, name);
  CHECK_EQ_INT(request(&m), 4);
  CHECK_EQ_INT(utvm_le(g_reply + 4, 8), 1 | (3ull << 32));
  return utvm_le(g_reply + 12, 8);
}

static void call_start(utvm_msg* m, uint64_t fn, uint32_t num, const int* codes) {
  m->len = 0;
  msg_u(m, CALL, 4);
  msg_u(m, fn, 8);
  msg_u(m, num, 4);
  for (uint32_t i = 0; i < num && codes != NULL; ++i) msg_u(m, (uint32_t)codes[i], 4);
}

static uint64_t system_lib(void) {
  utvm_msg m;
  call_start(&m, global("runtime.SystemLib"), 0, NULL);
  return call_result(&m, 9, 3);
}

/* ModuleGetFunction(module, name, 1): the handle, 0 for null. */
static uint64_t get_function(uint64_t module, const char* name) {
  static const int codes[3] = {9, 11, 0};
  utvm_msg m;
  call_start(&m, global("tvm.rpc.server.ModuleGetFunction"), 3, codes);
  msg_u(&m, module, 8);
  msg_str(&m, name);
  msg_u(&m, 1, 8);
  CHECK_EQ_INT(request(&m), 4);
  uint64_t wire = utvm_le(g_reply + 12, 4);
  return wire == 4 ? 0 : utvm_le(g_reply + 24, 8);
}

static uint64_t alloc(uint64_t nbytes) {
  static const int codes[4] = {6, 0, 0, 5};
  utvm_msg m = {.len = 0};
  msg_u(&m, ALLOC, 4);
  msg_u(&m, 4, 4);
  for (int i = 0; i < 4; ++i) msg_u(&m, (uint32_t)codes[i], 4);
  msg_u(&m, 1, 4);
  msg_u(&m, 0, 4);
  msg_u(&m, nbytes, 8);
  msg_u(&m, 64, 8);
  msg_u(&m, 2 | (32 << 8) | (1 << 16), 8);
  return request(&m) == 4 ? utvm_le(g_reply + 12, 8) : 0; /* 0: an exception */
}

static long copy_to(uint64_t data, const float* values, int64_t n) {
  utvm_msg m = {.len = 0};
  msg_u(&m, COPY_TO, 4);
  msg_tensor(&m, data, 1, &n, 2, 32);
  msg_u(&m, (uint64_t)n * 4, 8);
  msg_bytes(&m, values, (size_t)n * 4);
  return request(&m);
}

static long copy_from(uint64_t data, float* values, int64_t n) {
  utvm_msg m = {.len = 0};
  msg_u(&m, COPY_FROM, 4);
  msg_tensor(&m, data, 1, &n, 2, 32);
  msg_u(&m, (uint64_t)n * 4, 8);
  long code = request(&m);
  if (code == 8) memcpy(values, g_reply + 4, (size_t)n * 4);
  return code;
}

/* ---- framing and the worked example --------------------------------------------------- */

static void test_crc_and_frame_vectors(void) {
  CHECK_EQ_INT(mlf_utvm_crc16(0xFFFF, (const uint8_t*)"123456789", 9), 0x29B1);
  static const uint8_t payload[3] = {0xFF, 0x01, 0xFD};
  static const uint8_t wire[12] = {0xff, 0xfd, 0x03, 0, 0, 0, 0xff, 0xff, 0x01, 0xfd, 0x51, 0x87};
  memset(g_dev, 0, sizeof(*g_dev));
  utvm_device_start(g_dev, NULL, 0, NULL);
  g_dev->out_len = 0;
  mlf_utvm_tx_begin(&g_dev->ut, 3);
  mlf_utvm_tx_bytes(&g_dev->ut, payload, 3);
  mlf_utvm_tx_end(&g_dev->ut);
  CHECK_EQ_INT(g_dev->out_len, sizeof(wire));
  CHECK(memcmp(g_dev->out, wire, sizeof(wire)) == 0);
  /* An escaped CRC: 0xFFAD goes out as ad ff ff (checked through the host-side framer). */
  uint8_t out[64];
  static const uint8_t reply[4] = {0x43, 0x22, 0x01, 0x01};
  static const uint8_t reply_wire[12] = {0xff, 0xfd, 4, 0, 0, 0, 0x43, 0x22, 1, 1, 0xfc, 0xf7};
  CHECK_EQ_INT(utvm_frame(reply, 4, out), 12);
  CHECK(memcmp(out, reply_wire, 12) == 0);
}

static void test_worked_example(void) {
  static const uint8_t boot[12] = {0xfe, 0xff, 0xfd, 3, 0, 0, 0, 0, 0, 2, 0x66, 0x77};
  static const uint8_t host_init[12] = {0xff, 0xfd, 4, 0, 0, 0, 0x43, 0, 0, 1, 0x6b, 0x2c};
  static const uint8_t get_global[] = {
      0xff, 0xfd, 0x30, 0,   0,   0,   0x43, 0x22, 0x10, 0x25, 0,   0,    0,    0,
      0,    0,    0,    9,   0,   0,   0,    1,    0,    0,    0,   0x0b, 0,    0,
      0,    0x11, 0,    0,   0,   0,   0,    0,    0,    'r',  'u', 'n',  't',  'i',
      'm',  'e',  '.',  'S', 'y', 's', 't',  'e',  'm',  'L',  'i', 'b',  0x61, 0xd9};
  memset(g_dev, 0, sizeof(*g_dev));
  utvm_device_start(g_dev, kLibOnly, 1, NULL);
  CHECK_EQ_INT(g_dev->out_len, sizeof(boot));
  CHECK(memcmp(g_dev->out, boot, sizeof(boot)) == 0);
  g_dev->out_read = g_dev->out_len;
  mlf_utvm_feed(&g_dev->ut, boot, sizeof(boot)); /* the host's own FE + Terminate */
  mlf_utvm_feed(&g_dev->ut, host_init, sizeof(host_init));
  uint8_t reply[64];
  CHECK_EQ_INT(utvm_next_packet(g_dev, reply, sizeof(reply)), 4);
  CHECK(reply[0] == 0x43 && reply[1] != 0 && reply[2] == 1 && reply[3] == 1);
  g_dev->ut.device_nonce = 0x22; /* as in the example */
  mlf_utvm_feed(&g_dev->ut, get_global, sizeof(get_global));
  CHECK_EQ_INT(utvm_next_packet(g_dev, reply, sizeof(reply)), 0x1f);
  CHECK(reply[0] == 0x43 && reply[1] == 0x22 && reply[2] == 0x10);
  CHECK_EQ_INT(utvm_le(reply + 3, 8), 20);
  CHECK_EQ_INT(utvm_le(reply + 11, 4), 4); /* Return */
  CHECK_EQ_INT(utvm_le(reply + 15, 4), 1); /* one value */
  CHECK_EQ_INT(utvm_le(reply + 19, 4), 3); /* a handle */
  CHECK(utvm_le(reply + 23, 8) != 0);
}

/* ---- functions, memory, copies --------------------------------------------------------- */

static void test_system_lib_lookup(void) {
  fresh(kLibOnly, 1);
  uint64_t lib = system_lib();
  CHECK(lib != 0);
  uint64_t add = get_function(lib, "add");
  CHECK(add != 0);
  CHECK_EQ_INT(get_function(lib, "add"), add); /* one handle per function */
  CHECK_EQ_INT(get_function(lib, "_lookup_linked_param"), 0);
  CHECK_EQ_INT(get_function(lib, "nope"), 0);
  CHECK_EQ_INT(get_function(lib + 99, "add"), 0);
  CHECK_EQ_INT(global("no.such.global"), 0);
  utvm_msg m;
  call_start(&m, global("tvm.rpc.server.GetCRTMaxPacketSize"), 0, NULL);
  CHECK_EQ_INT(call_result(&m, 0, 0), 2037);
}

static void test_alloc_copy_call(void) {
  fresh(kLibOnly, 1);
  uint64_t add = get_function(system_lib(), "add");
  uint64_t a = alloc(16), b = alloc(16), out = alloc(16);
  CHECK(a != 0 && b != 0 && out != 0 && a % 64 == 0 && b != a);
  const float av[4] = {1, 2, 3, 4}, bv[4] = {10, 20, 30, 40};
  CHECK_EQ_INT(copy_to(a, av, 4), 4);
  CHECK_EQ_INT(copy_to(b, bv, 4), 4);
  static const int codes[3] = {7, 7, 7};
  const int64_t shape[1] = {4};
  utvm_msg m;
  call_start(&m, add, 3, codes);
  msg_tensor(&m, a, 1, shape, 2, 32);
  msg_tensor(&m, b, 1, shape, 2, 32);
  msg_tensor(&m, out, 1, shape, 2, 32);
  CHECK_EQ_INT(call_result(&m, 4, 4), 0);
  float got[4] = {0};
  CHECK_EQ_INT(copy_from(out, got, 4), 8);
  CHECK(got[0] == 11 && got[3] == 44);
  /* A tensor reaching past its allocation is refused before the function runs. */
  const int64_t big[1] = {17};
  call_start(&m, add, 3, codes);
  msg_tensor(&m, a, 1, shape, 2, 32);
  msg_tensor(&m, b, 1, shape, 2, 32);
  msg_tensor(&m, out, 1, big, 2, 32);
  CHECK(is_exception(&m, "tensor outside device memory"));
  CHECK_EQ_INT(copy_to(out + 4096, av, 4), 5);
  CHECK_EQ_INT(copy_from(0x10, got, 4), 5);
  m.len = 0;
  msg_u(&m, FREE_DATA, 4);
  msg_u(&m, 2, 4);
  msg_u(&m, 6, 4);
  msg_u(&m, 3, 4);
  msg_u(&m, 1, 8);
  msg_u(&m, b, 8);
  CHECK_EQ_INT(request(&m), 4);
  CHECK(is_exception(&m, "not a device allocation")); /* twice */
  CHECK_EQ_INT(copy_to(b, bv, 4), 5);                 /* freed memory is off limits */
  CHECK_EQ_INT(alloc(16), b);                         /* and is reused */
  CHECK_EQ_INT(alloc(UTVM_ARENA * 2), 0);             /* exhausted: an exception */
}

/* A graph model's signatures: a call must pass the tensors the graph passes, no fewer. */
/* The test library with one signature: add takes three tensors of `bytes` bytes each. */
static mlf_utvm_model add_signed(const uint32_t* bytes) {
  static const TVMBackendPackedCFunc funcs[1] = {op_add};
  static const mlf_utvm_signature sigs[1] = {{3, 0}};
  const mlf_utvm_model model = {.name = "default",
                                .library = &g_test_lib,
                                .sig_funcs = funcs,
                                .signatures = sigs,
                                .sig_bytes = bytes,
                                .num_signatures = 1};
  return model;
}

static void test_signatures(void) {
  static const uint32_t bytes[3] = {16, 16, 16};
  const mlf_utvm_model models[1] = {add_signed(bytes)};
  fresh(models, 1);
  uint64_t add = get_function(system_lib(), "add");
  uint64_t a = alloc(16), small = alloc(8);
  static const int codes[3] = {7, 7, 7}, with_int[3] = {7, 7, 0};
  const int64_t four[1] = {4}, two[1] = {2};
  utvm_msg m;
  call_start(&m, add, 2, codes);
  msg_tensor(&m, a, 1, four, 2, 32);
  msg_tensor(&m, a, 1, four, 2, 32);
  CHECK(is_exception(&m, "wrong number of arguments"));
  call_start(&m, add, 3, codes);
  msg_tensor(&m, a, 1, four, 2, 32);
  msg_tensor(&m, a, 1, four, 2, 32);
  msg_tensor(&m, small, 1, two, 2, 32);
  CHECK(is_exception(&m, "tensor smaller than the function's"));
  call_start(&m, add, 3, with_int);
  msg_tensor(&m, a, 1, four, 2, 32);
  msg_tensor(&m, a, 1, four, 2, 32);
  msg_u(&m, 7, 8);
  CHECK(is_exception(&m, "only numbers and tensors can be passed to a library function"));
  call_start(&m, add, 3, codes);
  for (int i = 0; i < 3; ++i) msg_tensor(&m, a, 1, four, 2, 32);
  CHECK_EQ_INT(call_result(&m, 4, 4), 0);
}

static void test_exceptions(void) {
  fresh(kLibOnly, 1);
  utvm_msg m = {.len = 0};
  msg_u(&m, 30, 4);
  msg_u(&m, 0, 4);
  CHECK(is_exception(&m, "Syscall not recognized"));
  m.len = 0;
  msg_u(&m, 11, 4);
  msg_u(&m, 0, 4);
  CHECK(is_exception(&m, "SetDevice not supported"));
  m.len = 0;
  msg_u(&m, 12, 4);
  msg_u(&m, 0, 4);
  CHECK(is_exception(&m, "GetAttr not supported"));
  call_start(&m, 0x1234, 0, NULL);
  CHECK(is_exception(&m, "unknown function handle"));
  static const int bad_code[1] = {99};
  call_start(&m, global("runtime.SystemLib"), 1, bad_code);
  CHECK(is_exception(&m, "unsupported argument type code"));
  call_start(&m, global("runtime.SystemLib"), 1000, NULL);
  CHECK(is_exception(&m, "too many arguments"));
  static const int str[1] = {11};
  call_start(&m, global("runtime.SystemLib"), 1, str);
  msg_u(&m, 1000, 8);
  CHECK(is_exception(&m, "truncated string"));
  uint64_t fail = get_function(system_lib(), "fail");
  call_start(&m, fail, 0, NULL);
  CHECK(is_exception(&m, NULL));
  m.len = 0;
  msg_u(&m, 4, 4);
  CHECK(is_exception(&m, "a reply code is not a request"));
  /* Still serving. */
  CHECK(system_lib() != 0);
}

/* ---- what TVM's own device does not survive ------------------------------------------- */

static void send_raw(const uint8_t* bytes, size_t n) { mlf_utvm_feed(&g_dev->ut, bytes, n); }

static void normal_packet(utvm_msg* packet, uint8_t n0, uint8_t n1, const utvm_msg* body) {
  packet->len = 0;
  msg_u(packet, n0, 1);
  msg_u(packet, n1, 1);
  msg_u(packet, 0x10, 1);
  msg_u(packet, body->len, 8);
  msg_bytes(packet, body->bytes, body->len);
}

static void test_recovery(void) {
  fresh(kLibOnly, 1);
  utvm_msg body = {.len = 0}, packet;
  msg_u(&body, GET_GLOBAL, 4);
  msg_u(&body, 1, 4);
  msg_u(&body, 11, 4);
  msg_str(&body, "runtime.SystemLib");
  static uint8_t wire[8192];
  uint8_t reply[256];
  /* A request with a bad CRC, then a good one: exactly one reply, to the good one. */
  normal_packet(&packet, g_dev->host_nonce, g_dev->device_nonce, &body);
  size_t n = utvm_frame(packet.bytes, packet.len, wire);
  wire[n - 1] ^= 0x55;
  g_dev->out_read = g_dev->out_len;
  send_raw(wire, n);
  CHECK_EQ_INT(utvm_next_packet(g_dev, reply, sizeof(reply)), -1);
  CHECK(global("runtime.SystemLib") != 0);
  /* A stale session's message is dropped; the session goes on. */
  normal_packet(&packet, (uint8_t)(g_dev->host_nonce + 1), g_dev->device_nonce, &body);
  g_dev->out_read = g_dev->out_len;
  utvm_send_packet(g_dev, packet.bytes, packet.len);
  CHECK_EQ_INT(utvm_next_packet(g_dev, reply, sizeof(reply)), -1);
  CHECK(global("runtime.SystemLib") != 0);
  /* Garbage, a packet cut short by a new start, an invalid escape, an oversized packet. */
  static const uint8_t garbage[] = {0x00, 0xFE, 0xFF, 0x01, 0xFD, 0xFF, 0xFF, 0xFD, 0x05, 0,
                                    0,    0,    1,    2,    0xFF, 0x07, 0xFF, 0xFD, 0x02, 0};
  send_raw(garbage, sizeof(garbage));
  static const uint8_t oversized[] = {0xFF, 0xFD, 0x88, 0x13, 0, 0, 0xFF, 0xFF, 0xFD, 1, 2, 3};
  send_raw(oversized, sizeof(oversized));
  memset(wire, 0, 5000 + 2);
  send_raw(wire, 5000 + 2); /* the rest of its payload and its CRC */
  CHECK(global("runtime.SystemLib") != 0);
  /* A new session (restarted host) gets a new device nonce and starts afresh. */
  uint8_t old = g_dev->device_nonce;
  CHECK_EQ_INT(utvm_handshake(g_dev, 0x99), 0);
  (void)old;
  CHECK(system_lib() != 0);
  /* The device never sends a packet over the host's 2048 bytes: CopyFromRemote of 4000. */
  uint64_t big = alloc(4000);
  utvm_msg m = {.len = 0};
  int64_t count = 1000;
  msg_u(&m, COPY_FROM, 4);
  msg_tensor(&m, big, 1, &count, 2, 32);
  msg_u(&m, 4000, 8);
  CHECK(is_exception(&m, "copy too large"));
  /* Shutdown: no reply, the feed says so. */
  m.len = 0;
  msg_u(&m, 1, 4);
  normal_packet(&packet, g_dev->host_nonce, g_dev->device_nonce, &m);
  n = utvm_frame(packet.bytes, packet.len, wire);
  CHECK_EQ_INT(mlf_utvm_feed(&g_dev->ut, wire, n), 1);
}

/* ---- time evaluator, random_fill, AOT executor module ------------------------------------ */

static void test_time_evaluator(void) {
  fresh(kLibOnly, 1);
  uint64_t lib = system_lib();
  static const int codes[12] = {9, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 11};
  utvm_msg m;
  call_start(&m, global("runtime.RPCTimeEvaluator"), 12, codes);
  msg_u(&m, lib, 8);
  msg_str(&m, "add");
  const uint64_t ints[9] = {1, 0, 3, 2, 1, 100, 0, 1, 0};
  for (int i = 0; i < 9; ++i) msg_u(&m, ints[i], 8);
  msg_str(&m, "");
  uint64_t timer = call_result(&m, 10, 3);
  CHECK(timer != 0);
  uint64_t a = alloc(16);
  static const int tcodes[3] = {7, 7, 7};
  const int64_t shape[1] = {4};
  call_start(&m, timer, 3, tcodes);
  for (int i = 0; i < 3; ++i) msg_tensor(&m, a, 1, shape, 2, 32);
  CHECK_EQ_INT(request(&m), 4);
  CHECK_EQ_INT(utvm_le(g_reply + 16, 8), 12); /* bytes */
  CHECK_EQ_INT(utvm_le(g_reply + 24, 8), 16); /* two doubles */
  double seconds[2];
  memcpy(seconds, g_reply + 32, sizeof(seconds));
  CHECK(seconds[0] >= 0 && seconds[0] < 1 && seconds[1] >= 0 && seconds[1] < 1);
  /* random_fill on a device tensor */
  static const int one_tensor[1] = {7};
  call_start(&m, global("tvm.contrib.random.random_fill"), 1, one_tensor);
  msg_tensor(&m, a, 1, shape, 2, 32);
  CHECK_EQ_INT(call_result(&m, 4, 4), 0);
}

static void test_aot_module(void) {
  size_t state_size = mlf_executor_state_bytes(&kBasicTables), arena_size;
  CHECK_STATUS(mlf_executor_arena_bytes(&kBasicTables, NULL, 0, 0, &arena_size), MLF_OK, NULL);
  void* state = malloc(state_size);
  void* arena = malloc(arena_size);
  mlf_executor ex;
  CHECK_STATUS(mlf_executor_init_bound(&ex, &kBasicTables, &g_test_lib, state, state_size, arena,
                                       arena_size),
               MLF_OK, &ex.error);
  const mlf_utvm_model models[1] = {{.name = "default", .library = &g_test_lib, .executor = &ex}};
  fresh(models, 1);
  uint64_t lib = system_lib();
  static const int create_codes[3] = {9, 6, 11};
  utvm_msg m;
  call_start(&m, global("tvm.aot_executor.create"), 3, create_codes);
  msg_u(&m, lib, 8);
  msg_u(&m, 1, 4);
  msg_u(&m, 0, 4);
  msg_str(&m, "default");
  uint64_t aot = call_result(&m, 9, 3);
  static const char* const names[8] = {"set_input",       "run",
                                       "get_output",      "get_input",
                                       "get_num_outputs", "get_input_index",
                                       "get_num_inputs",  "get_input_name"};
  uint64_t fn[8];
  for (int i = 0; i < 8; ++i) {
    fn[i] = get_function(aot, names[i]);
    CHECK(fn[i] != 0);
  }
  call_start(&m, fn[6], 0, NULL);
  CHECK_EQ_INT(call_result(&m, 0, 0), 2);
  call_start(&m, fn[4], 0, NULL);
  CHECK_EQ_INT(call_result(&m, 0, 0), 3);
  static const int int_code[1] = {0}, str_code[1] = {11};
  call_start(&m, fn[7], 1, int_code);
  msg_u(&m, 1, 8);
  CHECK_EQ_INT(request(&m), 4);
  CHECK_EQ_INT(utvm_le(g_reply + 24, 8), 2);
  CHECK(memcmp(g_reply + 32, "p0", 2) == 0);
  call_start(&m, fn[5], 1, str_code);
  msg_str(&m, "p0");
  CHECK_EQ_INT(call_result(&m, 0, 0), 1);
  /* set x and p0 through get_input's arrays, run, read output 2 (x + p0). */
  const float x[4] = {1, 2, 3, 4}, p[4] = {0.5f, 0.5f, 0.5f, 0.5f};
  for (int k = 0; k < 2; ++k) {
    call_start(&m, fn[3], 1, int_code);
    msg_u(&m, (uint64_t)k, 8);
    CHECK_EQ_INT(request(&m), 4);
    CHECK_EQ_INT(utvm_le(g_reply + 4, 4), 3);
    CHECK_EQ_INT(utvm_le(g_reply + 20, 8), 13); /* NDArray */
    uint64_t data = utvm_le(g_reply + 28, 8);
    CHECK_EQ_INT(utvm_le(g_reply + 44, 4), 2); /* ndim */
    CHECK_EQ_INT(copy_to(data, k == 0 ? x : p, 4), 4);
  }
  call_start(&m, fn[1], 0, NULL);
  CHECK_EQ_INT(call_result(&m, 4, 4), 0);
  call_start(&m, fn[2], 1, int_code);
  msg_u(&m, 2, 8);
  CHECK_EQ_INT(request(&m), 4);
  float got[4];
  CHECK_EQ_INT(copy_from(utvm_le(g_reply + 28, 8), got, 4), 8);
  CHECK(got[0] == 1.5f && got[3] == 4.5f);
  call_start(&m, fn[2], 1, int_code);
  msg_u(&m, 7, 8);
  CHECK(is_exception(&m, "bad argument or index"));
  free(state);
  free(arena);
}

/* ---- the graph executor module (tvm.graph_executor.create) ------------------------------ */

static int exception_has(const utvm_msg* m, const char* part) {
  if (request(m) != 5) return 0;
  size_t len = (size_t)utvm_le(g_reply + 12, 8);
  char text[512];
  if (len >= sizeof(text)) len = sizeof(text) - 1;
  memcpy(text, g_reply + 20, len);
  text[len] = '\0';
  if (strstr(text, part) == NULL) fprintf(stderr, "exception: %s\n", text);
  return strstr(text, part) != NULL;
}

/* tvm.graph_executor.create(json, lib, 1, 0): the request, ready to send. */
static void graph_create(utvm_msg* m, uint64_t lib, const char* json) {
  static const int codes[4] = {11, 9, 0, 0};
  call_start(m, global("tvm.graph_executor.create"), 4, codes);
  msg_str(m, json);
  msg_u(m, lib, 8);
  msg_u(m, 1, 8);
  msg_u(m, 0, 8);
}

static void free_module(utvm_msg* m, uint64_t module) {
  static const int codes[2] = {3, 0};
  m->len = 0;
  msg_u(m, FREE_HANDLE, 4);
  msg_u(m, 2, 4);
  for (int i = 0; i < 2; ++i) msg_u(m, (uint32_t)codes[i], 4);
  msg_u(m, module, 8);
  msg_u(m, 9, 8);
}

/* A call of fn with a key (name, or index when name is NULL) and optionally a tensor. */
static void keyed_call(utvm_msg* m, uint64_t fn, const char* name, uint64_t index, uint64_t data) {
  int codes[2] = {name != NULL ? 11 : 0, 7};
  const int64_t shape[2] = {1, 4};
  call_start(m, fn, data != 0 ? 2 : 1, codes);
  if (name != NULL) {
    msg_str(m, name);
  } else {
    msg_u(m, index, 8);
  }
  if (data != 0) msg_tensor(m, data, 2, shape, 2, 32);
}

static void test_graph_module(void) {
  fresh(kLibOnly, 1);
  uint64_t lib = system_lib();
  utvm_msg m;
  char* json = json_from(kBasicJson);
  graph_create(&m, lib, "{\"nodes\": [");
  CHECK(exception_has(&m, "tvm.graph_executor.create: "));
  char* unknown = json_from(kBasicJson);
  memcpy(strstr(unknown, "\"scale2\"") + 1, "nosuch", 6);
  graph_create(&m, lib, unknown);
  CHECK(exception_has(&m, "no function in the system library: nosuch"));
  free(unknown);
  graph_create(&m, lib, json);
  uint64_t gm = call_result(&m, 9, 3);
  CHECK_EQ_INT(gm >> 32, 7);
  static const char* const names[10] = {"set_input",       "run",
                                        "get_output",      "get_input",
                                        "get_num_outputs", "get_input_index",
                                        "get_num_inputs",  "load_params",
                                        "get_input_info",  "share_params"};
  uint64_t fn[10];
  for (int i = 0; i < 10; ++i) {
    fn[i] = get_function(gm, names[i]);
    CHECK(fn[i] != 0);
  }
  CHECK_EQ_INT(get_function(gm, "set_input_zero_copy"), 0);
  call_start(&m, fn[6], 0, NULL);
  CHECK_EQ_INT(call_result(&m, 0, 0), 2);
  call_start(&m, fn[4], 0, NULL);
  CHECK_EQ_INT(call_result(&m, 0, 0), 3);
  keyed_call(&m, fn[5], "p0", 0, 0);
  CHECK_EQ_INT(call_result(&m, 0, 0), 1);
  keyed_call(&m, fn[5], "nope", 0, 0);
  CHECK_EQ_INT((int64_t)call_result(&m, 0, 0), -1);
  /* set_input by name and by index from device arrays; get_input gives them back. */
  const float x[4] = {1, 2, 3, 4}, p[4] = {0.5f, 0.5f, 0.5f, 0.5f};
  uint64_t ax = alloc(16), ap = alloc(16), out = alloc(16);
  CHECK_EQ_INT(copy_to(ax, x, 4), 4);
  CHECK_EQ_INT(copy_to(ap, p, 4), 4);
  keyed_call(&m, fn[0], "x", 0, ax);
  CHECK_EQ_INT(call_result(&m, 4, 4), 0);
  keyed_call(&m, fn[0], NULL, 1, ap);
  CHECK_EQ_INT(call_result(&m, 4, 4), 0);
  keyed_call(&m, fn[0], "nope", 0, ap);
  CHECK(exception_has(&m, "set_input: no such input"));
  keyed_call(&m, fn[3], NULL, 1, 0);
  CHECK_EQ_INT(request(&m), 4);
  uint64_t p_data = utvm_le(g_reply + 28, 8);
  float got[4];
  CHECK_EQ_INT(copy_from(p_data, got, 4), 8);
  CHECK(got[0] == 0.5f && got[3] == 0.5f);
  CHECK_EQ_INT(copy_from(p_data, got, 8), 5); /* past the input: not the host's */
  call_start(&m, fn[1], 0, NULL);
  CHECK_EQ_INT(call_result(&m, 4, 4), 0);
  keyed_call(&m, fn[2], NULL, 2, 0);
  CHECK_EQ_INT(request(&m), 4);
  CHECK_EQ_INT(copy_from(utvm_le(g_reply + 28, 8), got, 4), 8);
  CHECK(got[0] == 1.5f && got[3] == 4.5f);
  keyed_call(&m, fn[2], NULL, 0, out); /* get_output(0, out) */
  CHECK_EQ_INT(call_result(&m, 4, 4), 0);
  CHECK_EQ_INT(copy_from(out, got, 4), 8);
  CHECK(got[0] == 2.5f && got[3] == 5.5f);
  keyed_call(&m, fn[2], NULL, 9, 0);
  CHECK(exception_has(&m, "get_output: no such output"));
  /* load_params: p0 from a params blob (then no longer an input). */
  static const int64_t shape14[2] = {1, 4};
  const float p2[4] = {10, 10, 10, 10};
  const test_param params[1] = {{"p0", {kDLFloat, 32, 1}, 2, shape14, p2, 16}};
  uint8_t blob[256];
  size_t blob_len = test_params_write(params, 1, blob, sizeof(blob));
  static const int bytes_code[1] = {12};
  call_start(&m, fn[7], 1, bytes_code);
  msg_u(&m, blob_len, 8);
  msg_bytes(&m, blob, blob_len);
  CHECK_EQ_INT(call_result(&m, 4, 4), 0);
  call_start(&m, fn[7], 1, bytes_code);
  msg_u(&m, 3, 8);
  msg_bytes(&m, "abc", 3);
  CHECK(exception_has(&m, "load_params: "));
  call_start(&m, fn[1], 0, NULL);
  CHECK_EQ_INT(call_result(&m, 4, 4), 0);
  keyed_call(&m, fn[2], NULL, 2, out);
  CHECK_EQ_INT(call_result(&m, 4, 4), 0);
  CHECK_EQ_INT(copy_from(out, got, 4), 8);
  CHECK(got[0] == 11.0f && got[3] == 14.0f);
  call_start(&m, fn[8], 0, NULL);
  CHECK(exception_has(&m, "not supported"));
  /* Two at once at most; freeing one makes room, twice is refused, its handles die. */
  graph_create(&m, lib, json);
  uint64_t second = call_result(&m, 9, 3);
  graph_create(&m, lib, json);
  CHECK(exception_has(&m, "too many graph executors"));
  free_module(&m, gm);
  CHECK_EQ_INT(request(&m), 4);
  free_module(&m, gm);
  CHECK(exception_has(&m, "handle already freed"));
  call_start(&m, fn[1], 0, NULL);
  CHECK(exception_has(&m, "graph executor freed"));
  CHECK_EQ_INT(get_function(gm, "run"), 0);
  CHECK_EQ_INT(copy_from(p_data, got, 4), 5); /* its memory is gone */
  graph_create(&m, lib, json);
  CHECK(call_result(&m, 9, 3) != gm);
  free_module(&m, second);
  CHECK_EQ_INT(request(&m), 4);
  free(json);
}

static void test_graph_signatures(void) {
  /* add takes three tensors of 32 bytes in its model's graph; the basic graph passes 16. */
  static const uint32_t bytes[3] = {32, 32, 32};
  const mlf_utvm_model models[1] = {add_signed(bytes)};
  fresh(models, 1);
  utvm_msg m;
  char* json = json_from(kBasicJson);
  graph_create(&m, system_lib(), json);
  CHECK(exception_has(&m, "a tensor smaller than its model's graph passes to add"));
  free(json);
  /* Nothing was kept: the arena is whole again. */
  CHECK_EQ_INT(g_dev->ut.num_blocks, 0);
  /* A request larger than the receive buffer is answered, not dropped. */
  static char big[UTVM_RX + 100];
  memset(big, ' ', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  graph_create(&m, system_lib(), big);
  CHECK(exception_has(&m, "larger than the device's receive buffer"));
  CHECK(system_lib() != 0);
}

int main(void) {
  g_dev = (utvm_device*)calloc(1, sizeof(*g_dev));
  RUN(test_crc_and_frame_vectors);
  RUN(test_worked_example);
  RUN(test_system_lib_lookup);
  RUN(test_alloc_copy_call);
  RUN(test_signatures);
  RUN(test_exceptions);
  RUN(test_recovery);
  RUN(test_time_evaluator);
  RUN(test_aot_module);
  RUN(test_graph_module);
  RUN(test_graph_signatures);
  free(g_dev);
  return test_finish();
}
