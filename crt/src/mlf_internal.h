/*
 * mlf_internal.h — declarations shared by the runtime's source files; not a public API.
 */
#ifndef MLF_INTERNAL_H_
#define MLF_INTERNAL_H_

#include <stddef.h>
#include <stdint.h>

#include "mlf_runtime.h"

/* ---- errors ----------------------------------------------------------------------------- */

/* Error descriptions (mlf_error.what). Building with -DMLF_ERROR_TEXT=0 replaces them all by
 * "" to save flash; status, node, offset and subject still say what failed and where. */
#ifndef MLF_ERROR_TEXT
#define MLF_ERROR_TEXT 1
#endif
#if MLF_ERROR_TEXT
#define MLF_TEXT(text) (text)
#else
#define MLF_TEXT(text) ""
#endif

/* Records a failure in err (which may be NULL) and returns status, so callers can write
 * `return mlf_fail(...)`. subject may be NULL. */
mlf_status mlf_fail(mlf_error* err, mlf_status status, const char* what, const char* subject,
                    size_t subject_len);

/* Resets err to "no error" (node and offset UINT32_MAX). */
void mlf_error_clear(mlf_error* err);

/* ---- JSON scanner (mlf_json.c) ------------------------------------------------------------
 * A cursor over JSON text that never copies it. Failures are sticky: once err->status is set,
 * every call returns 0 without moving, so parsers check once at the end of a phase. Several
 * cursors may share one err (the graph parser walks parallel lists in lockstep). */

typedef struct {
  const char* pos;
  const char* end;
  const char* begin; /* start of the whole text, for error offsets */
  mlf_error* err;
} mlf_json;

void mlf_json_init(mlf_json* j, const char* text, size_t len, mlf_error* err);

/* Records a failure of kind `status` at the cursor (the first failure only). Returns 0. */
int mlf_json_fail_as(mlf_json* j, mlf_status status, const char* what, mlf_name subject);

/* A syntax failure (MLF_ERR_JSON) at the cursor. Returns 0. */
int mlf_json_fail(mlf_json* j, const char* what);

/* Next non-blank character, or -1 at the end / after a failure. */
int mlf_json_peek(mlf_json* j);

/* Consumes `open` ('[' or '{'). Where another value stands, the failure is MLF_ERR_GRAPH
 * (valid JSON, wrong type), as for every typed read below; MLF_ERR_JSON where none does. */
int mlf_json_open(mlf_json* j, char open);

/* Container iteration: returns 1 when another member follows (consuming the ',' between
 * members), 0 at the closing bracket (consumed; ']' and '}' both close, as in
 * mlf_json_skip()) or on failure. *count starts at 0 and counts the members. */
int mlf_json_more(mlf_json* j, uint32_t* count);

/* A string's raw contents (escapes left as written). */
int mlf_json_string(mlf_json* j, mlf_name* out);

/* A non-negative JSON integer that fits uint32_t (no sign, fraction, exponent or leading
 * zero, so equal numbers are equal text). */
int mlf_json_u32(mlf_json* j, uint32_t* out);

/* Any value, at any depth, without recursion. Brackets are counted, not matched by kind, and
 * separators are not checked: content the parsers skip is only required to be tokens. */
int mlf_json_skip(mlf_json* j);

/* 1 when the name's raw bytes equal the NUL-terminated literal. */
int mlf_name_is(mlf_name name, const char* literal);

/* ---- params blob (mlf_params.c) ---------------------------------------------------------- */

typedef struct {
  mlf_name name;
  int32_t ndim;
  DLDataType dtype;
  const uint8_t* shape; /* ndim little-endian int64, unaligned: read with mlf_read_i64 */
  const uint8_t* data;  /* unaligned unless the blob was laid out for it */
  uint64_t nbytes;
} mlf_param;

typedef struct {
  const uint8_t* names;   /* next name record */
  const uint8_t* tensors; /* next tensor record */
  const uint8_t* end;
  size_t remaining;
} mlf_params_iter;

/* Validates the whole blob (magics, counts, bounds, nbytes against shape) and starts an
 * iteration. Afterwards mlf_params_next() cannot fail. */
mlf_status mlf_params_open(const void* blob, size_t len, mlf_params_iter* it, mlf_error* err);

/* Returns 1 and the next tensor, or 0 when done. */
int mlf_params_next(mlf_params_iter* it, mlf_param* out);

uint64_t mlf_read_u64(const uint8_t* p);
int64_t mlf_read_i64(const uint8_t* p);

/* ---- graph tables (mlf_executor.c) ------------------------------------------------------- */

/* Every index in range, every view inside its pool, counts within the state's limits. */
mlf_status mlf_graph_check(const mlf_graph* g, mlf_error* err);

/* Offsets in mlf_graph of every table's count and pointer, and its element size, in the
 * order the JSON parser lays the tables out. */
#define MLF_GRAPH_TABLES 8
extern const uint8_t mlf_graph_tables[MLF_GRAPH_TABLES][3];

/* ---- workspace (mlf_workspace.c) --------------------------------------------------------- */

/* Top of the bound workspace stack (0 when none is bound), and a way back to it after an
 * operator failed between its allocations and its frees. */
size_t mlf_workspace_mark(void);
void mlf_workspace_release_to(size_t mark);

#endif /* MLF_INTERNAL_H_ */
