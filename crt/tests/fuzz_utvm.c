/*
 * fuzz_utvm.c — libFuzzer target: the microTVM RPC server (template_project/firmware/
 * mlf_utvm_*.c: framing, session, MinRPC dispatch, globals, device memory) fed arbitrary
 * traffic (input format: fuzz_utvm.h), over a system library of operators that check their
 * tensors' shapes and an AOT model (the runtime's executor over the basic test graph); graph
 * executors the traffic creates (tvm.graph_executor.create) call the same library.
 *
 * Besides memory safety (ASan, UBSan) it checks what the device writes: every packet is
 * well-formed with a good CRC, and none carries more than the 2048 payload bytes TVM's host
 * accepts.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_utvm.h"
#include "test_graphs.h"
#include "test_util.h"
#include "utvm_support.h"

#define CALL_BUDGET 256 /* operator calls per input: a time evaluator must end */

static int g_calls;

static uint64_t bytes_of(const DLTensor* t) {
  uint64_t n = ((uint64_t)t->dtype.bits * t->dtype.lanes + 7u) / 8u;
  for (int32_t d = 0; d < t->ndim; ++d) n *= (uint64_t)t->shape[d];
  return n;
}

/* out = in, as many bytes as both hold (the server checked each against its memory). */
static int32_t op_copy(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                       void* resource) {
  (void)ret, (void)ret_code, (void)resource;
  if (++g_calls > CALL_BUDGET || num_args != 2 || codes[0] != kTVMNDArrayHandle ||
      codes[1] != kTVMNDArrayHandle) {
    TVMAPISetLastError("copy: two tensors");
    return -1;
  }
  const DLTensor* in = (const DLTensor*)args[0].v_handle;
  DLTensor* out = (DLTensor*)args[1].v_handle;
  uint64_t n = bytes_of(in) < bytes_of(out) ? bytes_of(in) : bytes_of(out);
  memmove(out->data, in->data, (size_t)n);
  return 0;
}

static int32_t op_nothing(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                          void* resource) {
  (void)args, (void)codes, (void)num_args, (void)ret, (void)ret_code, (void)resource;
  return ++g_calls > CALL_BUDGET ? -1 : 0;
}

static int32_t op_fails(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                        void* resource) {
  (void)args, (void)codes, (void)num_args, (void)ret, (void)ret_code, (void)resource;
  TVMAPISetLastError("fails: as asked");
  return -1;
}

static const TVMBackendPackedCFunc kFuncs[] = {op_copy, op_fails, op_nothing, op_copy};
static const TVMFuncRegistry kRegistry = {
    "\x04\x00"
    "copy\0fails\0nothing\0__tvm_main__\0",
    kFuncs};
static const TVMModule kLib = {&kRegistry};

static utvm_device* g_dev;
static mlf_executor g_ex;
/* "copy" with a signature (two tensors of at least 16 bytes), the rest without. */
static const TVMBackendPackedCFunc kSigFuncs[1] = {op_copy};
static const mlf_utvm_signature kSigs[1] = {{2, 0}};
static const uint32_t kSigBytes[2] = {16, 16};
static mlf_utvm_model g_models[2] = {{.name = "default",
                                      .library = &kLib,
                                      .sig_funcs = kSigFuncs,
                                      .signatures = kSigs,
                                      .sig_bytes = kSigBytes,
                                      .num_signatures = 1},
                                     {.name = "basic"}};
static uint8_t g_ws_memory[4096];
static mlf_workspace g_ws;

static void setup_once(void) {
  static uint64_t state[512];
  static uint8_t arena[4096];
  if (g_dev != NULL) return;
  g_dev = (utvm_device*)calloc(1, sizeof(*g_dev));
  if (mlf_executor_init_bound(&g_ex, &kBasicTables, &g_test_lib, state, sizeof(state), arena,
                              sizeof(arena)) != MLF_OK) {
    abort();
  }
  g_models[1].executor = &g_ex;
  mlf_workspace_init(&g_ws, g_ws_memory, sizeof(g_ws_memory));
}

/* Every packet the device wrote: well-formed, good CRC, at most 2048 payload bytes. */
static void check_output(void) {
  static uint8_t payload[UTVM_OUT];
  for (;;) {
    long n = utvm_next_packet(g_dev, payload, sizeof(payload));
    if (n == -1) break;
    if (n < 0 || n > (long)MLF_UTVM_HOST_MAX_PAYLOAD) abort();
  }
  g_dev->out_len = g_dev->out_read = 0;
}

static void send_record(const uint8_t* data, size_t len, int own_length, int wrong_session) {
  static utvm_msg packet;
  packet.len = 0;
  msg_u(&packet, g_dev->ut.host_nonce ^ (wrong_session ? 0x5A : 0), 1);
  msg_u(&packet, g_dev->ut.device_nonce, 1);
  msg_u(&packet, 0x10, 1);
  if (!own_length) msg_u(&packet, len, 8);
  uint64_t base = (uintptr_t)g_dev->ut.arena_base;
  for (size_t i = 0; i < len; ++i) {
    if (i + FUZZ_ADDRESS_MAGIC_LEN < len &&
        memcmp(data + i, FUZZ_ADDRESS_MAGIC, FUZZ_ADDRESS_MAGIC_LEN) == 0) {
      msg_u(&packet, base + 64u * data[i + FUZZ_ADDRESS_MAGIC_LEN], 8);
      i += FUZZ_ADDRESS_MAGIC_LEN;
    } else {
      msg_u(&packet, data[i], 1);
    }
  }
  utvm_send_packet(g_dev, packet.bytes, packet.len);
  check_output();
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  setup_once();
  if (size == 0) return 0;
  g_calls = 0;
  uint8_t mode = data[0];
  ++data, --size;
  if (utvm_device_start(g_dev, g_models, 2, (mode & 8) ? &g_ws : NULL) != 0) abort();
  if (mode & 1) {
    /* Raw bytes in chunks of 1..64 (the split point changes nothing but is exercised). */
    size_t chunk = (size_t)(mode >> 2) + 1;
    for (size_t at = 0; at < size && !g_dev->ut.shutdown; at += chunk) {
      mlf_utvm_feed(&g_dev->ut, data + at, size - at < chunk ? size - at : chunk);
      check_output();
    }
    return 0;
  }
  if (utvm_handshake(g_dev, (uint8_t)(mode | 0x80)) != 0) abort();
  check_output();
  for (size_t at = 0, k = 0; at + 2 <= size && !g_dev->ut.shutdown; ++k) {
    size_t len = (size_t)data[at] | (size_t)data[at + 1] << 8;
    at += 2;
    if (len > size - at) len = size - at;
    send_record(data + at, len, mode & 2, (mode & 4) && (k & 1));
    at += len;
  }
  return 0;
}
