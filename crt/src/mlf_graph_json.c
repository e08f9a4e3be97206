/*
 * mlf_graph_json.c — graph.json → mlf_graph tables, in place.
 *
 * The text is never copied: names stay slices of it, and lists are re-read where they lie.
 * Keys may come in any order, so objects are read in two steps: note where the values of
 * the wanted keys start (skipping the rest), then read those values in dependency order:
 * node_row_ptr, the per-entry attribute lists (walked in lockstep), arg_nodes, nodes, heads.
 *
 * A parse runs that sequence twice over the same text with the same code: a measuring pass
 * that only counts, then a building pass that writes into the caller's memory laid out from
 * those counts. Both passes find duplicate views and shapes the same way, by comparing an
 * entry with the earlier entries in the text, so they count alike; the building pass can
 * only come out smaller (__nop operators that vanish, repeated function names the measuring
 * pass could not remember), never larger.
 *
 * Structure is checked here; what the tables mean (every view inside its pool, __copy sizes,
 * index ranges) is checked once, by mlf_graph_check(), for parsed and generated tables alike.
 */
#include <string.h>

#include "mlf_internal.h"

#define MAX_INDEX 0xFFFFu /* views and arguments are uint16_t in the tables */
#define FUNC_CACHE 8u     /* names the measuring pass remembers, to count repeats once */

/* Keys of the objects read, and where their values start (slots indexed alike). */
enum { NODES, ARG_NODES, HEADS, ROW_PTR, ATTRS };
enum { SHAPE, DLTYPE, STORAGE_ID, DEVICE_INDEX };
enum { OP, NAME, INPUTS, OP_ATTRS };
enum { FUNC_NAME, FLATTEN };
static const char* const kTopKeys[] = {"nodes", "arg_nodes", "heads", "node_row_ptr", "attrs"};
static const char* const kAttrKeys[] = {"shape", "dltype", "storage_id", "device_index"};
static const char* const kNodeKeys[] = {"op", "name", "inputs", "attrs"};
static const char* const kOpKeys[] = {"func_name", "flatten_data"};

typedef struct {
  mlf_error* err;
  mlf_json whole;
  int build;
  const char* top[5];
  const char* attr[4]; /* the inner lists of attrs' ["list_<type>", [...]] values */
  uint32_t num_entries;
  mlf_graph* g;  /* running counts (measuring: &cap) */
  mlf_graph cap; /* what the measuring pass counted */
  mlf_op* ops;
  uint16_t* op_args;
  mlf_name* funcs;
  mlf_view* views;
  int64_t* shapes;
  uint32_t* storage_bytes;
  mlf_arg* args;
  uint32_t* outputs;
  uint32_t* entry_view; /* temporary: the view of every entry */
  mlf_name func_cache[FUNC_CACHE];
  uint32_t func_cache_next;
} parser;

typedef struct {
  uint32_t storage;
  DLDataType dtype;
  const char* shape; /* '[' of the shape list in the text */
  uint32_t ndim;
  uint32_t bytes;
} entry_key;

/* The storage_id, dltype and shape lists, read in lockstep. */
typedef struct {
  mlf_json list[3];
  uint32_t count[3];
} entry_lists;

static int failed(const parser* p) { return p->err->status != MLF_OK; }

/* A cursor at `at`, past the bracket `open` (none when 0). */
static void open_at(const parser* p, mlf_json* j, const char* at, char open) {
  *j = p->whole;
  j->pos = at;
  if (open) mlf_json_open(j, open);
}

/* A structural problem at the cursor; returns 0. */
static int bad(mlf_json* j, mlf_status status, const char* what, mlf_name subject) {
  if (j->err->status == MLF_OK) {
    mlf_fail(j->err, status, what, subject.str, subject.len);
    j->err->offset = (uint32_t)(j->pos - j->begin);
  }
  return 0;
}

static int graph_error(mlf_json* j, const char* what) {
  return bad(j, MLF_ERR_GRAPH, what, (mlf_name){NULL, 0});
}

/* Notes where the values of `keys` start in the object at the cursor (consumed). */
static void note_members(mlf_json* j, const char* const* keys, int n, const char** slots) {
  uint32_t count = 0;
  mlf_name key;
  mlf_json_open(j, '{');
  while (mlf_json_more(j, '}', &count) && mlf_json_key(j, &key)) {
    int i = 0;
    while (i < n && !mlf_name_is(key, keys[i])) ++i;
    mlf_json_peek(j);
    if (i < n) slots[i] = j->pos;
    mlf_json_skip(j); /* and unknown keys: metadata, hash, layouts, storage_scope, ... */
  }
}

static mlf_name string_at(const parser* p, const char* at) {
  mlf_name s = {NULL, 0};
  mlf_json j = p->whole;
  j.pos = at;
  if (at != NULL) mlf_json_string(&j, &s);
  return s;
}

static void find_sections(parser* p) {
  mlf_json j = p->whole;
  note_members(&j, kTopKeys, 5, p->top);
  if (mlf_json_peek(&j) >= 0) mlf_json_fail(&j, MLF_TEXT("text after the graph"));
  if (p->top[ATTRS] != NULL) {
    open_at(p, &j, p->top[ATTRS], '\0');
    note_members(&j, kAttrKeys, 4, p->attr);
  }
  for (int i = 0; i < 4; ++i) {
    uint32_t n = 0;
    if (p->attr[i] == NULL) continue;
    /* ["list_<type>", [...]]: keep where the inner list starts */
    open_at(p, &j, p->attr[i], '[');
    if (!mlf_json_more(&j, ']', &n) || !mlf_json_string(&j, NULL) || !mlf_json_more(&j, ']', &n)) {
      graph_error(&j, MLF_TEXT("attribute is not [\"list_<type>\", [...]]"));
    }
    mlf_json_peek(&j);
    p->attr[i] = j.pos;
  }
  if (!p->top[NODES] || !p->top[ARG_NODES] || !p->top[HEADS] || !p->top[ROW_PTR] ||
      !p->attr[SHAPE] || !p->attr[DLTYPE] || !p->attr[STORAGE_ID]) {
    graph_error(&j,
                MLF_TEXT("a section is missing (nodes, arg_nodes, heads, node_row_ptr, attrs)"));
  }
}

/* ---- node_row_ptr ---------------------------------------------------------------------- */

static void read_row_ptr(parser* p) {
  mlf_json j;
  uint32_t n = 0, value, previous = 0;
  open_at(p, &j, p->top[ROW_PTR], '[');
  while (mlf_json_more(&j, ']', &n) && mlf_json_u32(&j, &value)) {
    if ((n == 1 && value != 0) || value < previous)
      graph_error(&j, MLF_TEXT("node_row_ptr must rise from 0"));
    previous = value;
  }
  if (n == 0) graph_error(&j, MLF_TEXT("node_row_ptr is empty"));
  p->g->num_nodes = n - 1;
  p->num_entries = previous;
}

/* First entry of node nid and of the node after it (the list was validated). */
static void row_range(const parser* p, uint32_t nid, uint32_t* first, uint32_t* next) {
  mlf_json j;
  uint32_t n = 0, value = 0;
  open_at(p, &j, p->top[ROW_PTR], '[');
  while (n <= nid + 1 && mlf_json_more(&j, ']', &n) && mlf_json_u32(&j, &value)) {
    if (n == nid + 1) *first = value;
  }
  *next = value;
}

/* [nid, index(, version)] naming an output of a node before `limit`. */
static int read_entry_ref(parser* p, mlf_json* j, uint32_t limit, uint32_t* eid) {
  uint32_t n = 0, nid = 0, index = 0, first, next;
  mlf_json_open(j, '[');
  while (mlf_json_more(j, ']', &n)) {
    if (n > 2) {
      mlf_json_skip(j); /* the version */
    } else {
      mlf_json_u32(j, n == 1 ? &nid : &index);
    }
  }
  if (failed(p)) return 0;
  if (n < 2 || nid >= limit) return graph_error(j, MLF_TEXT("bad entry reference"));
  row_range(p, nid, &first, &next);
  if (index >= next - first) return graph_error(j, MLF_TEXT("bad entry reference"));
  *eid = first + index;
  return 1;
}

/* ---- entries ----------------------------------------------------------------------------- */

/* Decimal digits at s[*at..] (advancing *at); 0 when there are none. */
static uint32_t decimal(mlf_name s, uint32_t* at) {
  uint32_t value = 0;
  while (*at < s.len && s.str[*at] >= '0' && s.str[*at] <= '9' && value < 0x10000) {
    value = value * 10 + (uint32_t)(s.str[(*at)++] - '0');
  }
  return value;
}

/* (int|uint|float|bfloat)<bits>[x<lanes>], bool, handle. */
static int parse_dtype(mlf_name s, DLDataType* t) {
  /* Indexed by type code; kDLOpaqueHandle is spelled "handle" (always 64 bits). */
  static const char* const kPrefixes[] = {"int", "uint", "float", "handle", "bfloat"};
  uint32_t at = 0, bits, lanes = 1;
  if (mlf_name_is(s, "bool")) s = (mlf_name){"uint1", 5};
  if (mlf_name_is(s, "handle")) s = (mlf_name){"handle64", 8};
  while (at < s.len && (s.str[at] < '0' || s.str[at] > '9')) ++at;
  for (uint8_t code = 0; code < 5; ++code) {
    if (at != strlen(kPrefixes[code]) || memcmp(s.str, kPrefixes[code], at) != 0) continue;
    bits = decimal(s, &at);
    if (at < s.len && s.str[at] == 'x' && ++at) lanes = decimal(s, &at);
    /* bits in 1..255, lanes in 1..65535: unsigned wrap-around turns 0 into a huge value */
    if (at != s.len || bits - 1 > 254 || lanes - 1 > 0xFFFE) return 0;
    *t = (DLDataType){code, (uint8_t)bits, (uint16_t)lanes};
    return 1;
  }
  return 0;
}

static void open_lists(const parser* p, entry_lists* l) {
  memset(l->count, 0, sizeof(l->count));
  for (int i = 0; i < 3; ++i) open_at(p, &l->list[i], p->attr[i], '[');
}

/* Reads the next entry's storage id, dtype and shape (kept as a position in the text). */
static int read_entry(parser* p, entry_lists* l, entry_key* key) {
  mlf_json* shape = &l->list[SHAPE];
  mlf_name text;
  uint32_t n = 0, dim;
  uint64_t bytes;
  for (int i = 0; i < 3; ++i) {
    if (!mlf_json_more(&l->list[i], ']', &l->count[i])) {
      return graph_error(&l->list[i], MLF_TEXT("attribute lists and entries disagree"));
    }
  }
  if (!mlf_json_u32(&l->list[STORAGE_ID], &key->storage) ||
      !mlf_json_string(&l->list[DLTYPE], &text)) {
    return 0;
  }
  if (key->storage >= p->num_entries) {
    return graph_error(&l->list[STORAGE_ID], MLF_TEXT("storage id out of range"));
  }
  if (!parse_dtype(text, &key->dtype)) {
    return bad(&l->list[DLTYPE], MLF_ERR_GRAPH, MLF_TEXT("unknown dtype"), text);
  }
  bytes = mlf_dtype_bytes(key->dtype);
  mlf_json_peek(shape);
  key->shape = shape->pos;
  mlf_json_open(shape, '[');
  while (mlf_json_more(shape, ']', &n) && mlf_json_u32(shape, &dim)) {
    bytes *= dim; /* both factors < 2^32: no overflow before the check */
    if (bytes > UINT32_MAX || n > 255)
      return graph_error(shape, MLF_TEXT("bad shape (over 4 GiB)"));
  }
  key->ndim = n;
  key->bytes = (uint32_t)bytes;
  return !failed(p);
}

static int same_text_shape(const parser* p, const char* a_text, const char* b_text, uint32_t ndim) {
  mlf_json a, b;
  uint32_t na = 0, nb = 0, da = 0, db = 0;
  open_at(p, &a, a_text, '[');
  open_at(p, &b, b_text, '[');
  for (uint32_t d = 0; d < ndim; ++d) {
    mlf_json_more(&a, ']', &na);
    mlf_json_more(&b, ']', &nb);
    if (!mlf_json_u32(&a, &da) || !mlf_json_u32(&b, &db) || da != db) return 0;
  }
  return 1;
}

/* The first earlier entry with the same (storage, dtype, shape), and the first with the
 * same shape; UINT32_MAX when none. */
static void find_earlier(parser* p, uint32_t eid, const entry_key* key, uint32_t* same_view,
                         uint32_t* same_shape) {
  entry_lists l;
  entry_key other;
  *same_view = *same_shape = UINT32_MAX;
  open_lists(p, &l);
  for (uint32_t i = 0; i < eid && read_entry(p, &l, &other); ++i) {
    if (other.ndim != key->ndim || !same_text_shape(p, other.shape, key->shape, key->ndim)) {
      continue;
    }
    if (*same_shape == UINT32_MAX) *same_shape = i;
    if (other.storage == key->storage && !memcmp(&other.dtype, &key->dtype, sizeof(DLDataType))) {
      *same_view = i;
      return;
    }
  }
}

/* Appends a shape: `ndim` dimensions read from the text, or (text == NULL) one dimension. */
static uint32_t append_shape(parser* p, const char* text, uint32_t ndim, int64_t flat) {
  uint32_t at = p->g->num_shape_dims, n = 0, dim;
  mlf_json j;
  p->g->num_shape_dims += ndim;
  if (!p->build) return at;
  if (text == NULL) {
    p->shapes[at] = flat; /* a flattened view: ndim is 1 */
  } else {
    open_at(p, &j, text, '[');
    while (mlf_json_more(&j, ']', &n) && mlf_json_u32(&j, &dim)) p->shapes[at + n - 1] = dim;
  }
  return at;
}

static uint32_t new_view(parser* p, mlf_json* j, uint32_t storage, DLDataType dtype, uint32_t ndim,
                         uint32_t shape_at) {
  mlf_graph* g = p->g;
  if (g->num_views >= MAX_INDEX)
    return (uint32_t)graph_error(j, MLF_TEXT("too large for 16-bit indices"));
  if (p->build) p->views[g->num_views] = (mlf_view){storage, shape_at, (uint8_t)ndim, 0, dtype};
  return g->num_views++;
}

static void read_entries(parser* p) {
  entry_lists l;
  mlf_json device;
  entry_key key;
  uint32_t n_device = 0, device_type, same_view, same_shape, shape_at, eid;
  mlf_graph* g = p->g;
  open_lists(p, &l);
  if (p->attr[DEVICE_INDEX] != NULL) open_at(p, &device, p->attr[DEVICE_INDEX], '[');
  for (eid = 0; eid < p->num_entries && read_entry(p, &l, &key); ++eid) {
    if (p->attr[DEVICE_INDEX] != NULL && mlf_json_more(&device, ']', &n_device) &&
        mlf_json_u32(&device, &device_type) && device_type != kDLCPU) {
      bad(&device, MLF_ERR_UNSUPPORTED, MLF_TEXT("device_index other than 1 (CPU)"),
          (mlf_name){NULL, 0});
    }
    if (key.storage >= g->num_storage) g->num_storage = key.storage + 1;
    if (p->build && key.bytes > p->storage_bytes[key.storage]) {
      p->storage_bytes[key.storage] = key.bytes;
    }
    find_earlier(p, eid, &key, &same_view, &same_shape);
    if (same_view == UINT32_MAX) {
      shape_at = same_shape == UINT32_MAX ? append_shape(p, key.shape, key.ndim, 0)
                 : p->build               ? p->views[p->entry_view[same_shape]].shape
                                          : 0;
      same_view = new_view(p, &l.list[SHAPE], key.storage, key.dtype, key.ndim, shape_at);
    } else if (p->build) {
      same_view = p->entry_view[same_view];
    }
    if (p->build) p->entry_view[eid] = same_view;
  }
  /* Every list must end with the entries (device_index included, when present). */
  for (int i = 0; i < 4; ++i) {
    mlf_json* j = i < 3 ? &l.list[i] : &device;
    uint32_t* n = i < 3 ? &l.count[i] : &n_device;
    if ((i < 3 || p->attr[DEVICE_INDEX] != NULL) && (*n != eid || mlf_json_more(j, ']', n))) {
      graph_error(j, MLF_TEXT("attribute lists and entries disagree"));
    }
  }
}

/* ---- arg_nodes, nodes, heads --------------------------------------------------------------- */

static void read_args(parser* p) {
  mlf_json j;
  uint32_t n = 0, nid, first, next;
  open_at(p, &j, p->top[ARG_NODES], '[');
  while (mlf_json_more(&j, ']', &n) && mlf_json_u32(&j, &nid)) {
    if (nid >= p->g->num_nodes || n > MAX_INDEX) {
      graph_error(&j, MLF_TEXT("bad arg_nodes entry"));
    } else if (p->build) {
      row_range(p, nid, &first, &next);
      p->args[n - 1] = (mlf_arg){{NULL, 0}, p->entry_view[first], nid};
    }
  }
  p->g->num_args = n;
}

static int same_name(mlf_name a, mlf_name b) {
  return a.len == b.len && memcmp(a.str, b.str, a.len) == 0;
}

/* Building: the index of the function (added if new). Measuring: counts names not among the
 * last FUNC_CACHE distinct ones, an upper bound of the distinct names. */
static uint16_t func_index(parser* p, mlf_name name) {
  mlf_name* names = p->build ? p->funcs : p->func_cache;
  uint32_t known = p->build ? p->g->num_funcs : p->g->num_funcs < 8 ? p->g->num_funcs : 8;
  uint32_t i = 0;
  while (i < known && !same_name(names[i], name)) ++i;
  if (i < known) return (uint16_t)i;
  if (!p->build) i = p->func_cache_next++ % FUNC_CACHE;
  names[i] = name;
  return (uint16_t)p->g->num_funcs++;
}

/* Writes argument `index` of the op being read: the entry's view, or for flatten_data="1"
 * a fresh one-dimensional view of the same storage (not deduplicated: Relay never emits it). */
static void put_arg(parser* p, mlf_json* j, uint32_t index, uint32_t eid, int flatten) {
  uint32_t v = p->build ? p->entry_view[eid] : 0;
  if (flatten) {
    mlf_view w = {0, 0, 0, 0, {0, 0, 0}};
    int64_t elements = 1;
    if (p->build) w = p->views[v];
    for (uint32_t d = 0; d < w.ndim; ++d) elements *= p->shapes[w.shape + d];
    v = new_view(p, j, w.storage, w.dtype, 1, append_shape(p, NULL, 1, elements));
  }
  if (p->build) p->op_args[index] = (uint16_t)v;
}

static void read_op(parser* p, mlf_json* j, uint32_t nid, const char* const* slots, uint32_t first,
                    uint32_t next) {
  mlf_graph* g = p->g;
  const char* attrs[2] = {NULL, NULL};
  mlf_json l;
  uint32_t num_inputs = 0, eid, num_outputs = next - first, at = g->num_op_args;
  /* num_inputs/num_outputs attrs are implied by inputs and node_row_ptr: not consulted. */
  if (slots[OP_ATTRS] != NULL) {
    open_at(p, &l, slots[OP_ATTRS], '\0');
    note_members(&l, kOpKeys, 2, attrs);
  }
  mlf_name func = string_at(p, attrs[FUNC_NAME]), flatten = string_at(p, attrs[FLATTEN]);
  int flat = mlf_name_is(flatten, "1");
  if (slots[INPUTS] != NULL) {
    open_at(p, &l, slots[INPUTS], '[');
    while (mlf_json_more(&l, ']', &num_inputs) && read_entry_ref(p, &l, nid, &eid)) {
      put_arg(p, &l, at + num_inputs - 1, eid, flat);
    }
  }
  for (uint32_t k = 0; k < num_outputs && !failed(p); ++k) {
    put_arg(p, j, at + num_inputs + k, first + k, flat);
  }
  uint32_t num_args = num_inputs + num_outputs;
  int nop = mlf_name_is(func, "__nop"), copy = nop || mlf_name_is(func, "__copy");
  if (func.str == NULL) graph_error(j, MLF_TEXT("operator without func_name"));
  if (num_args > MAX_INDEX) graph_error(j, MLF_TEXT("too large for 16-bit indices"));
  if (copy && num_args != 2) graph_error(j, MLF_TEXT("__nop/__copy need one input and one output"));
  if (failed(p)) return;
  if (nop && p->build && p->views[p->op_args[at]].storage == p->views[p->op_args[at + 1]].storage) {
    return; /* a reshape in place: the output view already aliases the input */
  }
  /* A __nop whose planner did not share storage must still move the data: a copy. */
  uint16_t index = copy ? MLF_FUNC_COPY : func_index(p, func);
  if (p->build) {
    p->ops[g->num_ops] = (mlf_op){index, (uint16_t)num_args, (uint16_t)num_outputs, 0, at, nid};
  }
  ++g->num_ops;
  g->num_op_args += num_args;
  if (num_args > g->max_op_args) g->max_op_args = num_args;
}

static void read_null(parser* p, mlf_json* j, uint32_t nid, const char* const* slots,
                      uint32_t outputs) {
  mlf_json l;
  uint32_t n = 0;
  mlf_name name = string_at(p, slots[NAME]);
  if (slots[INPUTS] != NULL) {
    open_at(p, &l, slots[INPUTS], '[');
    mlf_json_more(&l, ']', &n); /* n becomes 1 if there is any input */
  }
  if (outputs != 1 || n != 0 || name.str == NULL) {
    graph_error(j, MLF_TEXT("a null node has a name, one output and no inputs"));
  }
  for (uint32_t i = 0; p->build && i < p->g->num_args; ++i) {
    if (p->args[i].node == nid) p->args[i].name = name;
  }
}

static void read_nodes(parser* p) {
  mlf_json j, rows;
  uint32_t n = 0, n_rows = 0, first = 0, next;
  open_at(p, &j, p->top[NODES], '[');
  open_at(p, &rows, p->top[ROW_PTR], '[');
  mlf_json_more(&rows, ']', &n_rows);
  mlf_json_u32(&rows, &first);
  while (!failed(p) && mlf_json_more(&j, ']', &n)) {
    const char* slots[4] = {NULL, NULL, NULL, NULL};
    if (n > p->g->num_nodes || !mlf_json_more(&rows, ']', &n_rows) || !mlf_json_u32(&rows, &next)) {
      graph_error(&j, MLF_TEXT("nodes and node_row_ptr disagree"));
      break;
    }
    note_members(&j, kNodeKeys, 4, slots);
    mlf_name op = string_at(p, slots[OP]);
    if (mlf_name_is(op, "null")) {
      read_null(p, &j, n - 1, slots, next - first);
    } else if (mlf_name_is(op, "tvm_op")) {
      read_op(p, &j, n - 1, slots, first, next);
    } else {
      bad(&j, MLF_ERR_GRAPH, MLF_TEXT("unknown node op"), op);
    }
    if (failed(p) && p->err->node == UINT32_MAX) p->err->node = n - 1;
    first = next;
  }
  if (n != p->g->num_nodes) graph_error(&j, MLF_TEXT("nodes and node_row_ptr disagree"));
  for (uint32_t i = 0; p->build && i < p->g->num_args && !failed(p); ++i) {
    if (p->args[i].name.str == NULL) {
      graph_error(&j, MLF_TEXT("arg_nodes names an operator node"));
      p->err->node = p->args[i].node;
    }
  }
}

static void read_heads(parser* p) {
  mlf_json j;
  uint32_t n = 0, eid;
  open_at(p, &j, p->top[HEADS], '[');
  while (mlf_json_more(&j, ']', &n) && read_entry_ref(p, &j, p->g->num_nodes, &eid)) {
    if (p->build) p->outputs[n - 1] = p->entry_view[eid];
  }
  p->g->num_outputs = n;
}

/* ---- passes and memory layout ---------------------------------------------------------------- */

static mlf_status run_pass(parser* p, int build) {
  void (*const phases[])(parser*) = {find_sections, read_row_ptr, read_entries,
                                     read_args,     read_nodes,   read_heads};
  p->build = build;
  for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]) && !failed(p); ++i) phases[i](p);
  return p->err->status;
}

/* Places the graph header, its tables and last the temporary entry→view map in mem (when
 * not NULL); returns the bytes needed. The text is under 256 MiB and every count is below
 * its length, so 32-bit arithmetic cannot overflow. */
static size_t layout(parser* p, uint8_t* mem) {
  const mlf_graph* c = &p->cap;
  const size_t sizes[] = {sizeof(mlf_graph),
                          c->num_ops * sizeof(mlf_op),
                          c->num_op_args * sizeof(uint16_t),
                          c->num_funcs * sizeof(mlf_name),
                          c->num_views * sizeof(mlf_view),
                          c->num_shape_dims * sizeof(int64_t),
                          c->num_storage * sizeof(uint32_t),
                          c->num_args * sizeof(mlf_arg),
                          c->num_outputs * sizeof(uint32_t),
                          p->num_entries * sizeof(uint32_t)};
  void* parts[10];
  size_t at = 0;
  for (int i = 0; i < 10; ++i) {
    parts[i] = (void*)((uintptr_t)mem + at); /* integer arithmetic: mem may be NULL */
    at += MLF_ALIGN_UP(sizes[i], 8);
  }
  p->g = (mlf_graph*)parts[0];
  p->ops = (mlf_op*)parts[1];
  p->op_args = (uint16_t*)parts[2];
  p->funcs = (mlf_name*)parts[3];
  p->views = (mlf_view*)parts[4];
  p->shapes = (int64_t*)parts[5];
  p->storage_bytes = (uint32_t*)parts[6];
  p->args = (mlf_arg*)parts[7];
  p->outputs = (uint32_t*)parts[8];
  p->entry_view = (uint32_t*)parts[9];
  return at;
}

/* The measuring pass: on success p->cap holds the counts and *bytes the memory needed. */
static mlf_status measure(parser* p, const char* json, size_t json_len, size_t* bytes,
                          mlf_error* err) {
  memset(p, 0, sizeof(*p));
  mlf_error_clear(err);
  if (json == NULL || bytes == NULL || json_len >= (1u << 28)) {
    return mlf_fail(err, MLF_ERR_ARGUMENT, MLF_TEXT("no graph text, or over 256 MiB"), NULL, 0);
  }
  p->err = err;
  mlf_json_init(&p->whole, json, json_len, err);
  p->g = &p->cap;
  if (run_pass(p, 0) == MLF_OK) *bytes = layout(p, NULL);
  return err->status;
}

mlf_status mlf_graph_measure_json(const char* json, size_t json_len, size_t* bytes,
                                  mlf_error* err) {
  parser p;
  mlf_error local;
  return measure(&p, json, json_len, bytes, err != NULL ? err : &local);
}

mlf_status mlf_graph_parse_json(const char* json, size_t json_len, void* mem, size_t mem_size,
                                const mlf_graph** graph, mlf_error* err) {
  parser p;
  mlf_error local;
  size_t need = 0;
  if (err == NULL) err = &local;
  if (graph == NULL) return MLF_ERR_ARGUMENT;
  *graph = NULL;
  if (measure(&p, json, json_len, &need, err) != MLF_OK) return err->status;
  if (mem == NULL || ((uintptr_t)mem & 7u) != 0) {
    return mlf_fail(err, MLF_ERR_ARGUMENT, MLF_TEXT("graph memory not 8-byte aligned"), NULL, 0);
  }
  if (mem_size < need)
    return mlf_fail(err, MLF_ERR_NO_MEMORY, MLF_TEXT("graph memory too small"), NULL, 0);
  memset(mem, 0, need);
  layout(&p, (uint8_t*)mem);
  if (run_pass(&p, 1) != MLF_OK) return err->status;
  mlf_graph* g = p.g;
  g->ops = p.ops;
  g->op_args = p.op_args;
  g->funcs = p.funcs;
  g->views = p.views;
  g->shapes = p.shapes;
  g->storage_bytes = p.storage_bytes;
  g->args = p.args;
  g->outputs = p.outputs;
  if (mlf_graph_check(g, err) != MLF_OK) return err->status;
  *graph = g;
  return MLF_OK;
}
