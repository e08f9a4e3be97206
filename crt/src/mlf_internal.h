/*
 * mlf_internal.h — declarations shared by the runtime's source files; not a public API.
 */
#ifndef MLF_INTERNAL_H_
#define MLF_INTERNAL_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mlf_runtime.h"

/* ---- errors ----------------------------------------------------------------------------- */

/* Why something failed: a code per failure site, passed instead of a string so that the
 * English descriptions (mlf_error.what) live once, in mlf_error.c's catalogue, and cost
 * no code where failures are detected. Building with -DMLF_ERROR_TEXT=0 empties the catalogue
 * (every description ""); status, node, offset and subject still say what failed and where,
 * and mlf_error_format() writes the code as "#<why>", which the host turns back into the
 * text (project_api/transport/reasons.py reads these lists: keep them one entry per line). */
#define MLF_WHY_LIST(X)                                                                  \
  X(NONE, "")                                                                            \
  X(TABLES, "table missing or too large")                                                \
  X(VIEW, "view outside its storage")                                                    \
  X(OPERATOR_TABLE, "bad operator")                                                      \
  X(ARG_VIEW, "bad arg or output view")                                                  \
  X(INIT_ARGUMENT, "graph, library and 8-byte aligned state needed")                     \
  X(STATE_SMALL, "executor state too small")                                             \
  X(ARENA_SMALL, "arena too small")                                                      \
  X(MISSING_FUNCTION, "function not in the system library")                              \
  X(PARAM_MISMATCH, "param shape or dtype differs from graph")                           \
  X(PARAM_IN_PLACE, "param is bound in place (read-only)")                               \
  X(OPERATOR_FAILED, "operator returned an error")                                       \
  X(GRAPH_ARGUMENT, "no graph text, or over 256 MiB")                                    \
  X(GRAPH_MEMORY_ALIGN, "graph memory not 8-byte aligned")                               \
  X(GRAPH_MEMORY_SMALL, "graph memory too small")                                        \
  X(NO_PARAMS, "no params")                                                              \
  X(PARAMS_HEADER, "bad magic, truncated names or counts differ")                        \
  X(TENSOR_TRUNCATED, "truncated tensor")                                                \
  X(TENSOR_HEADER, "bad tensor magic, device, ndim or dtype")                            \
  X(TENSOR_SHAPE, "bad shape or size")                                                   \
  X(TENSOR_DATA, "tensor data truncated or disagreeing with its shape and dtype")        \
  X(NO_WORKSPACE, "TVMBackendAllocWorkspace: no workspace bound")                        \
  X(WORKSPACE_EXHAUSTED, "TVMBackendAllocWorkspace: workspace exhausted")                \
  X(WORKSPACE_FREE, "TVMBackendFreeWorkspace: pointer is not a live workspace block")    \
  X(NULL_FUNCTION, "TVMFuncCall: NULL function")                                         \
  X(NO_ENVIRONMENT, "TVMBackendGetFuncFromEnv: no function environment in this runtime") \
  X(PLATFORM_ALLOCATE, "TVMPlatformMemoryAllocate failed")                               \
  X(ARENA_SIZE, "cannot size the arena")                                                 \
  X(UNPLACED_POOL, "pool neither bound nor placed")                                      \
  X(PLAN, "plan offset unaligned or outside its arena")                                  \
  X(WORKSPACE_WINDOW, "workspace request beyond its window")

/* The JSON parser's reasons, numbered after the others: their descriptions are a catalogue
 * of their own that only mlf_json_fail_as() reaches, so a firmware that does not link the
 * parser (generator tables) does not link them either. */
#define MLF_WHY_JSON_LIST(X)                                       \
  X(TRAILING_TEXT, "text after the graph")                         \
  X(MISSING_SECTION, "missing section")                            \
  X(ATTR_LIST, "attribute is not [\"list_<type>\", [...]]")        \
  X(ROW_PTR, "node_row_ptr must rise from 0")                      \
  X(BAD_REFERENCE, "bad node or output index")                     \
  X(LISTS_DISAGREE, "attribute lists and entries disagree")        \
  X(STORAGE_ID, "storage id out of range")                         \
  X(DEVICE, "device_index other than 1 (CPU)")                     \
  X(DTYPE, "unknown dtype")                                        \
  X(SHAPE, "shape with over 255 dimensions")                       \
  X(FUNC_NAME, "operator without func_name")                       \
  X(NULL_NODE, "a null node has a name, one output and no inputs") \
  X(NODE_OP, "unknown node op")                                    \
  X(NODES_DISAGREE, "nodes and node_row_ptr disagree")             \
  X(ARG_NODE, "arg_nodes names an operator node")                  \
  X(EXPECTED_CONTAINER, "expected [ or {")                         \
  X(EXPECTED_STRING, "expected string")                            \
  X(EXPECTED_NUMBER, "expected unsigned integer below 10^9")       \
  X(MISSING_COMMA, "missing , or bracket")                         \
  X(MISSING_COLON, "missing :")                                    \
  X(UNEXPECTED_END, "unexpected end")                              \
  X(UNEXPECTED, "unexpected character or end")                     \
  X(UNTERMINATED, "unterminated string")                           \
  X(CONTROL_CHARACTER, "control character in string")

typedef enum {
#define MLF_WHY_ENUM(name, text) MLF_WHY_##name,
  MLF_WHY_LIST(MLF_WHY_ENUM)
  /* the parser's reasons start at MLF_WHY_JSON_FIRST (the next enumerator takes its value) */
  MLF_WHY_JSON_FIRST,
  MLF_WHY_JSON_BEFORE_FIRST = MLF_WHY_JSON_FIRST - 1,
  MLF_WHY_JSON_LIST(MLF_WHY_ENUM)
#undef MLF_WHY_ENUM
} mlf_why;

/* The description of a reason ("" with MLF_ERROR_TEXT=0, and for the parser's reasons). */
const char* mlf_why_text(mlf_why why);

/* The description of one of the parser's reasons (MLF_WHY_JSON_FIRST and after). */
const char* mlf_why_json_text(mlf_why why);

/* Records a failure in err (which may be NULL; only the first failure is kept) and returns
 * status, so callers can write `return mlf_fail(...)`. */
mlf_status mlf_fail(mlf_error* err, mlf_status status, mlf_why why);

/* The same, naming the culprit: a slice, not NUL-terminated. */
mlf_status mlf_fail_about(mlf_error* err, mlf_status status, mlf_why why, const char* subject,
                          size_t subject_len);

/* 1 when two dtypes are equal (compared as the 32-bit words they are). */
static inline int mlf_same_dtype(DLDataType a, DLDataType b) {
  uint32_t x, y;
  memcpy(&x, &a, sizeof(x));
  memcpy(&y, &b, sizeof(y));
  return x == y;
}

/* 1 when a and b hold the same bytes. */
int mlf_name_equal(mlf_name a, mlf_name b);

/* Length of a NUL-terminated string, at most `limit`: strnlen's job, so that the runtime
 * needs no libc beyond memcpy/memset (GCC turns an unbounded loop back into a strlen call). */
size_t mlf_cstr_length(const char* s, size_t limit);

/* graph.json texts are shorter than this (offsets in errors and tables stay far from 32 bits). */
#define MLF_JSON_MAX_BYTES ((size_t)1 << 28)

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

/* Records a failure of kind `status` at the cursor (the first failure only), naming `subject`
 * when not NULL. Returns 0. */
int mlf_json_fail_as(mlf_json* j, mlf_status status, mlf_why why, const mlf_name* subject);

/* A syntax failure (MLF_ERR_JSON) at the cursor. Returns 0. */
int mlf_json_fail(mlf_json* j, mlf_why why);

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

/* Live blocks of the bound workspace (0 when none is bound), and a way back to that depth
 * after an operator failed between its allocations and its frees. */
size_t mlf_workspace_mark(void);
void mlf_workspace_release_to(size_t mark);

/* Per operator call figures (mlf_workspace_watch), in a runtime built with
 * MLF_WORKSPACE_MARKS=1 (the host's firmware and the C tests; off elsewhere: no code). */
#ifndef MLF_WORKSPACE_MARKS
#define MLF_WORKSPACE_MARKS 0
#endif
#if MLF_WORKSPACE_MARKS
/* Starts the bound workspace's measure of a call; returns what it holds as the call begins. */
size_t mlf_workspace_watch_begin(void);
/* Stores call `index`'s figure: the most held since watch_begin, less `from`. */
void mlf_workspace_watch_end(uint32_t index, size_t from);
#endif

/* The workspace TVMBackendAllocWorkspace() draws from, or NULL. */
mlf_workspace* mlf_workspace_bound(void);

/* Points ws at `size` bytes from `base` (an operator's window; NULL, 0: none), empty;
 * returns the requests it refused since it was last lent or initialised. */
uint32_t mlf_workspace_lend(mlf_workspace* ws, uint8_t* base, size_t size);

#endif /* MLF_INTERNAL_H_ */
