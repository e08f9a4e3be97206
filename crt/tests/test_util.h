/*
 * test_util.h — shared by the runtime's C tests: a minimal check framework, hand-written
 * operators with TVM's packed signature, a system-lib registry laid out like TVM's
 * <model>_lib0.c, and a TVM params blob writer.
 */
#ifndef MLF_TEST_UTIL_H_
#define MLF_TEST_UTIL_H_

#include <stddef.h>
#include <stdint.h>

#include "mlf_runtime.h"

/* ---- checks ----------------------------------------------------------------------------- */

extern int g_test_failures;

#define CHECK(cond)                                   \
  do {                                                \
    if (!(cond)) {                                    \
      test_report_failure(__FILE__, __LINE__, #cond); \
    }                                                 \
  } while (0)

#define CHECK_EQ_INT(actual, expected)                                          \
  do {                                                                          \
    long long actual_ = (long long)(actual), expected_ = (long long)(expected); \
    if (actual_ != expected_) {                                                 \
      test_report_mismatch(__FILE__, __LINE__, #actual, actual_, expected_);    \
    }                                                                           \
  } while (0)

/* Checks a status and, when it differs, prints the error record too. */
#define CHECK_STATUS(actual, expected, err) \
  test_check_status(__FILE__, __LINE__, #actual, (actual), (expected), (err))

void test_report_failure(const char* file, int line, const char* what);
void test_report_mismatch(const char* file, int line, const char* what, long long actual,
                          long long expected);
void test_check_status(const char* file, int line, const char* what, mlf_status actual,
                       mlf_status expected, const mlf_error* err);

/* Runs a test function, printing its name; returns the process exit status at the end. */
#define RUN(test) test_run(#test, test)
void test_run(const char* name, void (*test)(void));
int test_finish(void);

/* ---- operators -------------------------------------------------------------------------- */

/* Calls made through the test registry, for checking dispatch. */
extern int g_op_calls;

/* out = a + b, float32, elementwise over out's elements (inputs may be broadcast scalars). */
int32_t op_add(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
               void* resource);
/* out = 2 * in */
int32_t op_scale2(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                  void* resource);
/* out0 = in + 1, out1 = in * 10 (two outputs) */
int32_t op_split(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                 void* resource);
/* out = sum of the 11 inputs (12 arguments) */
int32_t op_sum11(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                 void* resource);
/* out = in * 3 with scalar (ndim 0) tensors */
int32_t op_scalar3(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                   void* resource);
/* out = in + 100, using 3 KiB of nested workspace on the way */
int32_t op_workspace(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                     void* resource);
/* allocates workspace then fails without freeing it (as generated code does on errors) */
int32_t op_fail(TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code,
                void* resource);

/* The registry: names blob with a 2-byte count, like TVM >= 0.9. */
extern const TVMModule g_test_lib;
/* The same functions with TVM <= 0.8's 1-byte count. */
extern const TVMModule g_test_lib_v08;

#define LONG_FUNC_NAME                                                                     \
  "tvmgen_default_fused_nn_conv2d_add_fixed_point_multiply_per_axis_add_clip_cast_subtrac" \
  "t_1c9b307ace4645e7_a_name_well_past_any_fixed_limit_0"

/* ---- params blobs ------------------------------------------------------------------------- */

typedef struct {
  const char* name;
  DLDataType dtype;
  int32_t ndim;
  const int64_t* shape;
  const void* data;
  uint64_t nbytes;
} test_param;

/* Writes a TVM params blob; returns its size (or the size needed when buf is too small). */
size_t test_params_write(const test_param* params, size_t count, uint8_t* buf, size_t size);

/* Offset of the data of tensor `index` in a blob written by test_params_write(). */
size_t test_params_data_offset(const test_param* params, size_t count, size_t index);

/* Reads a whole file into a malloc'd buffer (test programs only; NUL-terminated). */
char* test_read_file(const char* path, size_t* len);

#endif /* MLF_TEST_UTIL_H_ */
