/*
 * test_misc.c — the workspace stack, the registry lookup (2-byte and 1-byte counts), error
 * records and last-error string, TVM's platform hooks, the host platform, and the
 * TVMGraphExecutor_* compatibility layer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mlf_platform.h"
#include "test_graphs.h"
#include "test_util.h"
#include "tvm/runtime/crt/graph_executor.h"
#include "tvm/runtime/crt/platform.h"

/* ---- workspace ------------------------------------------------------------------------------ */

static void test_workspace_stack(void) {
  static uint8_t mem[1000];
  mlf_workspace ws;
  uint8_t* unaligned = mem + (64 - (uintptr_t)mem % 64) % 64 + 3;
  CHECK_STATUS(mlf_workspace_init(&ws, unaligned, 500), MLF_OK, NULL);
  CHECK(((uintptr_t)ws.base & 63) == 0 && ws.base >= unaligned && ws.base < unaligned + 64);
  /* What follows the boundary, down to a whole link. */
  CHECK_EQ_INT(ws.size, (500 - (size_t)(ws.base - unaligned)) & ~(size_t)3);

  CHECK(TVMBackendAllocWorkspace(kDLCPU, 0, 8, kDLFloat, 32) == NULL); /* nothing bound */
  CHECK(strstr(TVMGetLastError(), "no workspace") != NULL);
  mlf_workspace_bind(&ws);
  uint8_t* a = (uint8_t*)TVMBackendAllocWorkspace(kDLCPU, 0, 10, kDLFloat, 32);
  uint8_t* b = (uint8_t*)TVMBackendAllocWorkspace(kDLCPU, 0, 100, kDLFloat, 32);
  uint8_t* c = (uint8_t*)TVMBackendAllocWorkspace(kDLCPU, 0, 0, kDLFloat, 32);
  CHECK(a == ws.base && b == ws.base + 64 && c == ws.base + 192);
  CHECK(((uintptr_t)a | (uintptr_t)b | (uintptr_t)c) % 64 == 0);
  memset(b, 1, 100);
  /* Exhausted: NULL, never an abort; the stack is unchanged. */
  CHECK(TVMBackendAllocWorkspace(kDLCPU, 0, 1000, kDLFloat, 32) == NULL);
  CHECK(strstr(TVMGetLastError(), "exhausted") != NULL);
  CHECK(TVMBackendAllocWorkspace(kDLCPU, 0, UINT64_MAX, kDLFloat, 32) == NULL);
  CHECK_EQ_INT(ws.top, 192);
  CHECK_EQ_INT(ws.depth, 3);
  CHECK_EQ_INT(TVMBackendFreeWorkspace(kDLCPU, 0, c), 0);
  CHECK_EQ_INT(TVMBackendFreeWorkspace(kDLCPU, 0, b), 0);
  CHECK_EQ_INT(ws.top, 64);
  /* Pointers that are not the last live block are refused (the top itself is a zero-byte
   * block). */
  CHECK(TVMBackendFreeWorkspace(kDLCPU, 0, b + 64) != 0);
  CHECK(TVMBackendFreeWorkspace(kDLCPU, 0, b) != 0); /* freed already */
  CHECK(TVMBackendFreeWorkspace(kDLCPU, 0, a + 1) != 0);
  CHECK(TVMBackendFreeWorkspace(kDLCPU, 0, mem + 999) != 0);
  CHECK(TVMBackendFreeWorkspace(kDLCPU, 0, NULL) != 0);
  CHECK(strstr(TVMGetLastError(), "not a live workspace block") != NULL);
  CHECK_EQ_INT(TVMBackendFreeWorkspace(kDLCPU, 0, a), 0);
  CHECK_EQ_INT(ws.top, 0);
  CHECK(TVMBackendFreeWorkspace(kDLCPU, 0, a) != 0); /* nothing live */
  /* 10 + 54 padding + 100 + 28 padding + 0, and the links of the two blocks below c. */
  CHECK_EQ_INT(mlf_workspace_high_water(&ws), 192 + 2 * MLF_WORKSPACE_LINK_BYTES);
  CHECK_EQ_INT(mlf_workspace_high_water(NULL), 0);
  /* The whole remaining size can be taken by one block, one byte more cannot. */
  CHECK(TVMBackendAllocWorkspace(kDLCPU, 0, ws.size + 1, kDLFloat, 32) == NULL);
  CHECK(TVMBackendAllocWorkspace(kDLCPU, 0, ws.size, kDLFloat, 32) == ws.base);
  /* Reset drops every block. */
  mlf_workspace_reset(&ws);
  CHECK(ws.top == 0 && ws.depth == 0);
  CHECK(TVMBackendFreeWorkspace(kDLCPU, 0, ws.base) != 0);
  mlf_workspace_reset(NULL);
  mlf_workspace_bind(NULL);
  CHECK(TVMBackendFreeWorkspace(kDLCPU, 0, ws.base) != 0);

  CHECK_STATUS(mlf_workspace_init(&ws, unaligned, 10), MLF_OK, NULL); /* all lost to alignment */
  CHECK_EQ_INT(ws.size, 0);
  CHECK_STATUS(mlf_workspace_init(NULL, mem, 10), MLF_ERR_ARGUMENT, NULL);
  CHECK_STATUS(mlf_workspace_init(&ws, NULL, 10), MLF_ERR_ARGUMENT, NULL);
  CHECK_STATUS(mlf_workspace_init(&ws, NULL, 0), MLF_OK, NULL); /* empty: refuses everything */
  mlf_workspace_bind(&ws);
  CHECK(TVMBackendAllocWorkspace(kDLCPU, 0, 0, kDLFloat, 32) == NULL);
  mlf_workspace_bind(NULL);
}

/* A state of the stack, to show a refused free changes nothing. */
typedef struct {
  size_t top, last, high_water;
  uint32_t depth;
  uint8_t links[4 * MLF_WORKSPACE_LINK_BYTES];
} stack_state;

static stack_state state_of(const mlf_workspace* ws) {
  stack_state s;
  memset(&s, 0, sizeof(s));
  s.top = ws->top;
  s.last = ws->last;
  s.high_water = ws->high_water;
  s.depth = ws->depth;
  memcpy(s.links, ws->base + ws->size - sizeof(s.links), sizeof(s.links));
  return s;
}

static int same_state(stack_state a, stack_state b) {
  return a.top == b.top && a.last == b.last && a.high_water == b.high_water && a.depth == b.depth &&
         memcmp(a.links, b.links, sizeof(a.links)) == 0;
}

/* A free of anything but the last live block is refused and leaves the stack as it was:
 * an earlier block (which used to move the top down under the blocks above it), a pointer
 * inside a block, NULL, a pointer outside the workspace. The control: the same blocks freed
 * in reverse order are taken back, and the memory they held is handed out again. */
static void test_workspace_refuses_out_of_order_free(void) {
  static uint8_t mem[1024 + 64];
  static uint8_t elsewhere[128];
  mlf_workspace ws;
  CHECK_STATUS(mlf_workspace_init(&ws, mem, sizeof(mem)), MLF_OK, NULL);
  mlf_workspace_bind(&ws);
  uint8_t* a = (uint8_t*)TVMBackendAllocWorkspace(kDLCPU, 0, 100, kDLInt, 8);
  uint8_t* b = (uint8_t*)TVMBackendAllocWorkspace(kDLCPU, 0, 64, kDLInt, 8);
  uint8_t* c = (uint8_t*)TVMBackendAllocWorkspace(kDLCPU, 0, 16, kDLInt, 8);
  CHECK(a != NULL && b == a + 128 && c == b + 64);
  memset(b, 0xB, 64);
  stack_state before = state_of(&ws);
  void* wrong[] = {a, b, c + 1, c + 64, b + 1, NULL, elsewhere, mem + sizeof(mem) - 4};
  for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); ++i) {
    CHECK(TVMBackendFreeWorkspace(kDLCPU, 0, wrong[i]) == -1);
    CHECK(strstr(TVMGetLastError(), "not a live workspace block") != NULL);
    CHECK(same_state(before, state_of(&ws)));
  }
  /* What freeing a would have done before: the next block would start under b. */
  uint8_t* d = (uint8_t*)TVMBackendAllocWorkspace(kDLCPU, 0, 32, kDLInt, 8);
  CHECK(d == c + 64);
  for (int i = 0; i < 64; ++i) CHECK(b[i] == 0xB);
  /* Control: in reverse order every free succeeds, down to an empty stack. */
  CHECK_EQ_INT(TVMBackendFreeWorkspace(kDLCPU, 0, d), 0);
  CHECK_EQ_INT(TVMBackendFreeWorkspace(kDLCPU, 0, c), 0);
  CHECK(ws.top == (size_t)(c - ws.base) && ws.depth == 2);
  CHECK_EQ_INT(TVMBackendFreeWorkspace(kDLCPU, 0, b), 0);
  CHECK_EQ_INT(TVMBackendFreeWorkspace(kDLCPU, 0, a), 0);
  CHECK(ws.top == 0 && ws.depth == 0);
  CHECK(TVMBackendAllocWorkspace(kDLCPU, 0, 8, kDLInt, 8) == a); /* the memory is free again */
  mlf_workspace_bind(NULL);
}

/* The size rule the generator plans windows by (MLF_WORKSPACE_LINK_BYTES): n nested blocks
 * take align64(s1) + .. + align64(s(n-1)) + sn + (n - 1) links — exactly: a workspace of that
 * size holds them, one 4 bytes smaller refuses the last. Twenty 16-byte blocks take 1,308. */
static void test_workspace_size_rule(void) {
  static uint8_t mem[2048] __attribute__((aligned(64)));
  const size_t need = 19 * 64 + 16 + 19 * MLF_WORKSPACE_LINK_BYTES;
  mlf_workspace ws;
  for (int shortfall = 0; shortfall <= 4; shortfall += 4) {
    CHECK_STATUS(mlf_workspace_init(&ws, mem, need - (size_t)shortfall), MLF_OK, NULL);
    mlf_workspace_bind(&ws);
    int granted = 0;
    void* blocks[20];
    for (int i = 0; i < 20; ++i) {
      blocks[i] = TVMBackendAllocWorkspace(kDLCPU, 0, 16, kDLInt, 8);
      if (blocks[i] == NULL) break;
      memset(blocks[i], i, 16);
      ++granted;
    }
    CHECK_EQ_INT(granted, shortfall ? 19 : 20);
    CHECK_EQ_INT(ws.refused, shortfall ? 1 : 0);
    if (!shortfall) CHECK_EQ_INT(mlf_workspace_high_water(&ws), need);
    for (int i = granted - 1; i >= 0; --i) {
      for (int k = 0; k < 16; ++k) CHECK(((uint8_t*)blocks[i])[k] == i); /* links kept apart */
      CHECK_EQ_INT(TVMBackendFreeWorkspace(kDLCPU, 0, blocks[i]), 0);
    }
    mlf_workspace_bind(NULL);
  }
}

/* ---- registry ------------------------------------------------------------------------------- */

static void test_registry(void) {
  static const char* const kNames[] = {"add",   "fail",  "scale2",    "scalar3",
                                       "split", "sum11", "workspace", LONG_FUNC_NAME};
  const TVMModule* libs[] = {&g_test_lib, &g_test_lib_v08};
  for (int l = 0; l < 2; ++l) {
    for (size_t i = 0; i < sizeof(kNames) / sizeof(kNames[0]); ++i) {
      TVMBackendPackedCFunc fn = NULL;
      CHECK_STATUS(mlf_module_lookup(libs[l], kNames[i], strlen(kNames[i]), &fn), MLF_OK, NULL);
      CHECK(fn == libs[l]->registry->funcs[i]);
    }
    TVMBackendPackedCFunc fn;
    CHECK_STATUS(mlf_module_lookup(libs[l], "ad", 2, &fn), MLF_ERR_MISSING_FUNCTION, NULL);
    CHECK_STATUS(mlf_module_lookup(libs[l], "addx", 4, &fn), MLF_ERR_MISSING_FUNCTION, NULL);
    CHECK_STATUS(mlf_module_lookup(libs[l], "split_and_more", 5, &fn), MLF_OK, NULL);
  }
  TVMBackendPackedCFunc fn;
  CHECK_STATUS(mlf_module_lookup(NULL, "add", 3, &fn), MLF_ERR_ARGUMENT, NULL);
  CHECK_STATUS(mlf_module_lookup(&g_test_lib, "add", 3, NULL), MLF_ERR_ARGUMENT, NULL);
}

static void test_registry_counts(void) {
  /* 300 functions: the count's high byte is 1. */
  static char blob[300 * 8 + 4];
  static TVMBackendPackedCFunc funcs[300];
  size_t at = 2;
  blob[0] = (char)(300 & 0xFF);
  blob[1] = (char)(300 >> 8);
  for (int i = 0; i < 300; ++i) {
    at += (size_t)sprintf(blob + at, "f%03d", i) + 1;
    funcs[i] = (TVMBackendPackedCFunc)(i % 2 ? op_add : op_scale2);
  }
  blob[at] = '\0';
  TVMFuncRegistry registry = {blob, funcs};
  TVMModule lib = {&registry};
  TVMBackendPackedCFunc fn = NULL;
  CHECK_STATUS(mlf_module_lookup(&lib, "f299", 4, &fn), MLF_OK, NULL);
  CHECK(fn == (TVMBackendPackedCFunc)op_add);
  CHECK_STATUS(mlf_module_lookup(&lib, "f300", 4, &fn), MLF_ERR_MISSING_FUNCTION, NULL);

  /* A count larger than the names present stops at the terminating empty name. */
  static const TVMBackendPackedCFunc two[] = {(TVMBackendPackedCFunc)op_add,
                                              (TVMBackendPackedCFunc)op_add};
  TVMFuncRegistry short_registry = {"\x09\000a\000b\000", two};
  TVMModule short_lib = {&short_registry};
  CHECK_STATUS(mlf_module_lookup(&short_lib, "b", 1, &fn), MLF_OK, NULL);
  CHECK_STATUS(mlf_module_lookup(&short_lib, "c", 1, &fn), MLF_ERR_MISSING_FUNCTION, NULL);
  TVMFuncRegistry empty_registry = {"\000\000", two};
  TVMModule empty_lib = {&empty_registry};
  CHECK_STATUS(mlf_module_lookup(&empty_lib, "", 0, &fn), MLF_ERR_MISSING_FUNCTION, NULL);
}

static void test_packed_calls(void) {
  static _Alignas(64) float data[3][16] = {{1}, {2}, {0}};
  int64_t shape[1] = {1};
  DLTensor t[3];
  for (int i = 0; i < 3; ++i) {
    DLTensor init = {data[i], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
    t[i] = init;
  }
  TVMValue args[3] = {{.v_handle = &t[0]}, {.v_handle = &t[1]}, {.v_handle = &t[2]}};
  int codes[3] = {kTVMNDArrayHandle, kTVMNDArrayHandle, kTVMNDArrayHandle};
  TVMValue ret;
  int ret_code;
  TVMBackendPackedCFunc fn;
  mlf_module_lookup(&g_test_lib, "add", 3, &fn);
  TVMFunctionHandle handle;
  memcpy(&handle, &fn, sizeof(handle));
  CHECK(TVMFuncCall(handle, args, codes, 3, &ret, &ret_code) == 0 && data[2][0] == 3);
  CHECK(TVMFuncCall(NULL, args, codes, 3, &ret, &ret_code) != 0);
  TVMFunctionHandle out = (TVMFunctionHandle)1;
  CHECK(TVMBackendGetFuncFromEnv(NULL, "add", &out) != 0 && out == NULL);
  CHECK(strstr(TVMGetLastError(), "TVMBackendGetFuncFromEnv") != NULL);
}

/* ---- errors ---------------------------------------------------------------------------------- */

static void test_errors(void) {
  for (int s = MLF_OK; s <= MLF_ERR_STATE; ++s) {
    const char* name = mlf_status_name((mlf_status)s);
    CHECK(name != NULL && strcmp(name, "unknown status") != 0);
  }
  CHECK(strcmp(mlf_status_name((mlf_status)99), "unknown status") == 0);
  CHECK(strcmp(mlf_status_name(MLF_ERR_MISSING_FUNCTION), "missing function") == 0);

  mlf_error err = {MLF_ERR_OPERATOR, 7, 42, "operator returned an error", "conv_1", 4, 0};
  char buf[128];
  size_t n = mlf_error_format(&err, buf, sizeof(buf));
  CHECK(strcmp(buf, "operator failed: operator returned an error 'conv' at node 7 at byte 42") ==
        0);
  CHECK_EQ_INT(n, strlen(buf));
  n = mlf_error_format(&err, buf, 10);
  CHECK_EQ_INT(n, 9);
  CHECK(strcmp(buf, "operator ") == 0);
  CHECK_EQ_INT(mlf_error_format(&err, buf, 0), 0);
  mlf_error plain = {MLF_ERR_NO_MEMORY, UINT32_MAX, UINT32_MAX, NULL, NULL, 0, 0};
  mlf_error_format(&plain, buf, sizeof(buf));
  CHECK(strcmp(buf, "out of memory") == 0);
  /* Texts compiled out: the reason's code, for the host to put the text back. */
  mlf_error coded = {MLF_ERR_GRAPH, 3, UINT32_MAX, "", NULL, 0, 12};
  mlf_error_format(&coded, buf, sizeof(buf));
  CHECK(strcmp(buf, "bad graph: #12 at node 3") == 0);
  mlf_error_format(NULL, buf, sizeof(buf));
  CHECK(strcmp(buf, "no error record") == 0);

  char long_message[300];
  memset(long_message, 'm', sizeof(long_message) - 1);
  long_message[sizeof(long_message) - 1] = '\0';
  TVMAPISetLastError(long_message);
  CHECK_EQ_INT(strlen(TVMGetLastError()), 127);
  TVMAPISetLastError("short");
  CHECK(strcmp(TVMGetLastError(), "short") == 0);
  TVMAPISetLastError(NULL);
  CHECK(strcmp(TVMGetLastError(), "") == 0);
}

/* ---- TVM hooks and the host platform -------------------------------------------------------- */

static size_t format(char* buf, size_t size, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  size_t n = TVMPlatformFormatMessage(buf, size, fmt, args);
  va_end(args);
  return n;
}

static void test_hooks_and_platform(void) {
  char buf[8];
  CHECK_EQ_INT(format(buf, sizeof(buf), "%d-%s", 42, "abc"), 6);
  CHECK(strcmp(buf, "42-abc") == 0);
  CHECK_EQ_INT(format(buf, sizeof(buf), "%s", "much too long"), 7);
  CHECK_EQ_INT(format(buf, 0, "%s", "x"), 0);
  TVMLogf("TVMLogf says %d", 42);

  double seconds = -1;
  CHECK(TVMPlatformTimerStop(&seconds) == kTvmErrorPlatformTimerBadState);
  CHECK(TVMPlatformTimerStart() == kTvmErrorNoError);
  CHECK(TVMPlatformTimerStart() == kTvmErrorPlatformTimerBadState);
  CHECK(TVMPlatformTimerStop(&seconds) == kTvmErrorNoError);
  CHECK(seconds >= 0 && seconds < 10);

  mlf_platform_init();
  uint64_t t0 = mlf_platform_ticks(), t1 = mlf_platform_ticks();
  CHECK(t1 >= t0 && mlf_platform_tick_hz() == 1000000000u);
  mlf_platform_log("mlf_platform_log works");

  /* abort and exit end the process with the right status. */
  int codes[2] = {134, 3};
  for (int k = 0; k < 2; ++k) {
    pid_t pid = fork();
    if (pid == 0) {
      if (k == 0) TVMPlatformAbort(kTvmErrorPlatformNoMemory);
      mlf_platform_exit(3);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == codes[k]);
  }

  /* The console link is fd 0 / fd 1 raw bytes: round-trip through a pipe. */
  int fds[2];
  CHECK(pipe(fds) == 0);
  int saved_in = dup(0), saved_out = dup(1);
  dup2(fds[1], 1);
  mlf_platform_write((const uint8_t*)"\x00\x01\xFF", 3);
  dup2(saved_out, 1);
  close(fds[1]);
  dup2(fds[0], 0);
  uint8_t got[8];
  size_t n = mlf_platform_read(got, sizeof(got));
  CHECK(n == 3 && got[0] == 0 && got[1] == 1 && got[2] == 0xFF);
  CHECK_EQ_INT(mlf_platform_read(got, sizeof(got)), 0); /* EOF: the link is gone */
  dup2(saved_in, 0);
  close(fds[0]);
  close(saved_in);
  close(saved_out);
}

/* ---- TVMGraphExecutor_* ---------------------------------------------------------------------- */

/* The firmware's allocator, with a failure switch. */
static int g_allocations_left = 1000;
static int g_live_blocks;

tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr) {
  (void)dev;
  if (g_allocations_left-- <= 0) return kTvmErrorPlatformNoMemory;
  *out_ptr = aligned_alloc(64, MLF_ALIGN_UP(num_bytes, 64));
  ++g_live_blocks;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev) {
  (void)dev;
  free(ptr);
  --g_live_blocks;
  return kTvmErrorNoError;
}

static void test_compat_layer(void) {
  static const float kX[4] = {1, 2, 3, 4}, kP0[4] = {10, 20, 30, 40};
  int64_t shape14[2] = {1, 4}, shape4[1] = {4};
  test_param params[] = {{"p0", {kDLFloat, 32, 1}, 2, shape14, kP0, 16}};
  uint8_t blob[256];
  size_t len = test_params_write(params, 1, blob, sizeof(blob));
  char* json = json_from(kBasicJson);
  DLDevice cpu = {kDLCPU, 0};
  TVMGraphExecutor* ge = NULL;
  CHECK_EQ_INT(TVMGraphExecutor_Create(json, (TVMModuleHandle)&g_test_lib, &cpu, &ge), 0);
  free(json); /* TVM's API lets the caller drop its JSON */
  if (ge == NULL) return;
  CHECK_EQ_INT(TVMGraphExecutor_GetNumInputs(ge), 2);
  CHECK_EQ_INT(TVMGraphExecutor_GetNumOutputs(ge), 3);
  CHECK_EQ_INT(TVMGraphExecutor_LoadParams(ge, (const char*)blob, (uint32_t)len), 0);
  CHECK_EQ_INT(TVMGraphExecutor_GetNumInputs(ge), 1);
  CHECK_EQ_INT(TVMGraphExecutor_GetInputIndex(ge, "x"), 0);
  CHECK_EQ_INT(TVMGraphExecutor_GetInputIndex(ge, "nope"), -1);
  DLTensor in = {(void*)kX, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape14, NULL, 0};
  CHECK_EQ_INT(TVMGraphExecutor_SetInput(ge, "x", &in), 0);
  CHECK(TVMGraphExecutor_SetInput(ge, "nope", &in) != 0);
  CHECK_EQ_INT(TVMGraphExecutor_Run(ge), 0);
  float out[4];
  DLTensor out_tensor = {out, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape4, NULL, 0};
  CHECK_EQ_INT(TVMGraphExecutor_GetOutput(ge, 2, &out_tensor), 0);
  for (int i = 0; i < 4; ++i) CHECK(out[i] == kX[i] + kP0[i]);
  CHECK(TVMGraphExecutor_GetOutput(ge, 3, &out_tensor) != 0);
  CHECK(TVMGraphExecutor_LoadParams(ge, (const char*)blob, 10) != 0);
  CHECK(strstr(TVMGetLastError(), "bad params") != NULL);
  CHECK_EQ_INT(TVMGraphExecutor_Release(&ge), 0);
  CHECK(ge == NULL);
  CHECK_EQ_INT(g_live_blocks, 0);
  CHECK(TVMGraphExecutor_Release(&ge) != 0);
  CHECK(TVMGraphExecutor_Run(NULL) != 0);
  CHECK_EQ_INT(TVMGraphExecutor_GetNumInputs(NULL), -1);

  /* A missing function is reported by name, and nothing leaks. */
  json = json_from(kBasicJson);
  memcpy(strstr(json, "\"split\""), "\"splat\"", 7);
  CHECK(TVMGraphExecutor_Create(json, (TVMModuleHandle)&g_test_lib, NULL, &ge) != 0);
  CHECK(strstr(TVMGetLastError(), "'splat'") != NULL);
  CHECK(ge == NULL && g_live_blocks == 0);
  /* Allocation failures at every step. */
  for (int budget = 0; budget < 5; ++budget) {
    g_allocations_left = budget;
    CHECK(TVMGraphExecutor_Create(json, (TVMModuleHandle)&g_test_lib, NULL, &ge) != 0);
    CHECK(ge == NULL && g_live_blocks == 0);
  }
  g_allocations_left = 1000;
  DLDevice gpu = {kDLCUDA, 0};
  CHECK(TVMGraphExecutor_Create(json, (TVMModuleHandle)&g_test_lib, &gpu, &ge) != 0);
  free(json);
  /* Bad JSON reports the parser's message. */
  CHECK(TVMGraphExecutor_Create("{\"nodes\": 3}", (TVMModuleHandle)&g_test_lib, NULL, &ge) != 0);
  CHECK(strstr(TVMGetLastError(), "bad graph") != NULL || strstr(TVMGetLastError(), "JSON"));

  /* A failing operator: Run reports it. */
  uint8_t ws_mem[1024];
  mlf_workspace ws;
  mlf_workspace_init(&ws, ws_mem, sizeof(ws_mem));
  mlf_workspace_bind(&ws);
  json = json_from(kFailJson);
  CHECK_EQ_INT(TVMGraphExecutor_Create(json, (TVMModuleHandle)&g_test_lib, NULL, &ge), 0);
  CHECK(TVMGraphExecutor_Run(ge) != 0);
  CHECK(strstr(TVMGetLastError(), "node 2") != NULL);
  TVMGraphExecutor_Release(&ge);
  mlf_workspace_bind(NULL);
  free(json);
}

int main(void) {
  RUN(test_workspace_stack);
  RUN(test_workspace_refuses_out_of_order_free);
  RUN(test_workspace_size_rule);
  RUN(test_registry);
  RUN(test_registry_counts);
  RUN(test_packed_calls);
  RUN(test_errors);
  RUN(test_hooks_and_platform);
  RUN(test_compat_layer);
  return test_finish();
}
