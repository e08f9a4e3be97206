/*
 * mlf_graph_json.c — graph.json → mlf_graph tables, in place.
 *
 * The text is never copied: names stay slices of it, and lists are re-read where they lie.
 * Top-level keys may come in any order, so a first scan only notes where each section's
 * value starts; the sections are then read in dependency order: node_row_ptr, the
 * per-entry attribute lists (walked in lockstep), arg_nodes, nodes, heads.
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

#define MAX_INDEX 0xFFFFu /* views, args, functions: uint16_t indices in the tables */
#define FUNC_CACHE 8u     /* names the measuring pass remembers, to count repeats once */

enum { NODES, ARG_NODES, HEADS, ROW_PTR, SHAPE, DLTYPE, STORAGE_ID, DEVICE_INDEX, SECTIONS };

static const char* const kSectionKeys[SECTIONS] = {
    "nodes", "arg_nodes", "heads", "node_row_ptr", "shape", "dltype", "storage_id", "device_index"};

typedef struct {
  mlf_error* err;
  mlf_json whole;
  int build;
  const char* section[SECTIONS]; /* where each value starts; NULL when absent */
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
  mlf_json sid, dtype, shape;
  uint32_t n_sid, n_dtype, n_shape;
} entry_lists;

static int failed(const parser* p) { return p->err->status != MLF_OK; }

static void open_at(const parser* p, mlf_json* j, const char* at, char open) {
  *j = p->whole;
  j->pos = at;
  mlf_json_open(j, open);
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

/* ---- sections ------------------------------------------------------------------------- */

static void note_value(mlf_json* j, const char** slot) {
  mlf_json_peek(j);
  *slot = j->pos;
  mlf_json_skip(j);
}

/* Members whose key is one of kSectionKeys[first..last) are noted, others skipped. */
static void note_members(parser* p, mlf_json* j, int first, int last) {
  uint32_t n = 0, m;
  mlf_name key;
  mlf_json_open(j, '{');
  while (mlf_json_more(j, '}', &n) && mlf_json_key(j, &key)) {
    int i = first;
    while (i < last && !mlf_name_is(key, kSectionKeys[i])) ++i;
    if (first == NODES && mlf_name_is(key, "attrs")) {
      note_members(p, j, SHAPE, SECTIONS);
    } else if (i == last) {
      mlf_json_skip(j); /* metadata, storage_scope, and anything newer */
    } else if (first == NODES) {
      note_value(j, &p->section[i]);
    } else {
      /* attrs.<key> is ["list_<type>", [...]] */
      m = 0;
      mlf_json_open(j, '[');
      if (!mlf_json_more(j, ']', &m) || !mlf_json_string(j, NULL) || !mlf_json_more(j, ']', &m)) {
        graph_error(j, "attribute is not [\"list_<type>\", [...]]");
      }
      note_value(j, &p->section[i]);
      while (mlf_json_more(j, ']', &m)) mlf_json_skip(j);
    }
  }
}

static void find_sections(parser* p) {
  mlf_json j = p->whole;
  note_members(p, &j, NODES, SHAPE);
  if (mlf_json_peek(&j) >= 0) mlf_json_fail(&j, "text after the graph");
  for (int i = 0; i < DEVICE_INDEX; ++i) {
    if (p->section[i] == NULL) {
      bad(&j, MLF_ERR_GRAPH, "missing section",
          (mlf_name){kSectionKeys[i], (uint32_t)strlen(kSectionKeys[i])});
    }
  }
}

/* ---- node_row_ptr ------------------------------------------------------------------------ */

static void read_row_ptr(parser* p) {
  mlf_json j;
  uint32_t n = 0, value, previous = 0;
  open_at(p, &j, p->section[ROW_PTR], '[');
  while (mlf_json_more(&j, ']', &n) && mlf_json_u32(&j, &value)) {
    if ((n == 1 && value != 0) || value < previous)
      graph_error(&j, "node_row_ptr must rise from 0");
    previous = value;
  }
  if (n == 0) graph_error(&j, "node_row_ptr is empty");
  p->g->num_nodes = n - 1;
  p->num_entries = previous;
}

/* First entry of node nid and of the node after it (the list was validated). */
static void row_range(const parser* p, uint32_t nid, uint32_t* first, uint32_t* next) {
  mlf_json j;
  uint32_t n = 0, value = 0;
  open_at(p, &j, p->section[ROW_PTR], '[');
  while (n <= nid + 1 && mlf_json_more(&j, ']', &n) && mlf_json_u32(&j, &value)) {
    if (n == nid + 1) *first = value;
  }
  *next = value;
}

/* [nid, index(, version)] naming an output of a node before `limit`. */
static int read_entry_ref(parser* p, mlf_json* j, uint32_t limit, uint32_t* eid) {
  uint32_t n = 0, nid, index, first, next;
  mlf_json_open(j, '[');
  if (!mlf_json_more(j, ']', &n) || !mlf_json_u32(j, &nid) || !mlf_json_more(j, ']', &n) ||
      !mlf_json_u32(j, &index)) {
    return graph_error(j, "an entry reference is [node, index]");
  }
  while (mlf_json_more(j, ']', &n)) mlf_json_skip(j); /* the version, if any */
  if (nid >= limit) return graph_error(j, "reference to a missing or later node");
  row_range(p, nid, &first, &next);
  if (index >= next - first) return graph_error(j, "output index out of range");
  *eid = first + index;
  return !failed(p);
}

/* ---- entries ----------------------------------------------------------------------------- */

static int parse_dtype(mlf_name s, DLDataType* t) {
  /* Indexed by type code; kDLOpaqueHandle is spelled "handle" (always 64 bits). */
  static const char* const kPrefixes[] = {"int", "uint", "float", "handle", "bfloat"};
  uint32_t bits, lanes = 1, split;
  if (mlf_name_is(s, "bool")) s = (mlf_name){"uint1", 5};
  if (mlf_name_is(s, "handle")) s = (mlf_name){"handle64", 8};
  for (uint8_t code = 0; code < 5; ++code) {
    size_t n = strlen(kPrefixes[code]);
    if (s.len <= n || memcmp(s.str, kPrefixes[code], n) != 0) continue;
    s.str += n;
    s.len -= (uint32_t)n;
    for (split = 0; split < s.len && s.str[split] != 'x';) ++split;
    /* bits in 1..255, lanes in 1..65535 (unsigned wrap-around turns 0 into a huge value) */
    if (!mlf_name_to_u32((mlf_name){s.str, split}, &bits) || bits - 1 > 254 ||
        (split < s.len &&
         (!mlf_name_to_u32((mlf_name){s.str + split + 1, s.len - split - 1}, &lanes) ||
          lanes - 1 > 0xFFFE))) {
      return 0;
    }
    *t = (DLDataType){code, (uint8_t)bits, (uint16_t)lanes};
    return 1;
  }
  return 0;
}

static void open_lists(const parser* p, entry_lists* l) {
  memset(l, 0, sizeof(*l));
  open_at(p, &l->sid, p->section[STORAGE_ID], '[');
  open_at(p, &l->dtype, p->section[DLTYPE], '[');
  open_at(p, &l->shape, p->section[SHAPE], '[');
}

static int read_entry(parser* p, entry_lists* l, entry_key* key) {
  mlf_name text;
  uint32_t n = 0, dim;
  uint64_t bytes;
  if (!mlf_json_more(&l->sid, ']', &l->n_sid) || !mlf_json_more(&l->dtype, ']', &l->n_dtype) ||
      !mlf_json_more(&l->shape, ']', &l->n_shape)) {
    return graph_error(&l->sid, "attribute lists shorter than the entries");
  }
  if (!mlf_json_u32(&l->sid, &key->storage) || !mlf_json_string(&l->dtype, &text)) return 0;
  if (key->storage >= p->num_entries) return graph_error(&l->sid, "storage id out of range");
  if (!parse_dtype(text, &key->dtype)) return bad(&l->dtype, MLF_ERR_GRAPH, "unknown dtype", text);
  bytes = mlf_dtype_bytes(key->dtype);
  mlf_json_peek(&l->shape);
  key->shape = l->shape.pos;
  mlf_json_open(&l->shape, '[');
  while (mlf_json_more(&l->shape, ']', &n) && mlf_json_u32(&l->shape, &dim)) {
    bytes *= dim; /* both factors < 2^32: no overflow before the check */
    if (bytes > UINT32_MAX) return graph_error(&l->shape, "tensor larger than 4 GiB");
  }
  if (n > 255) return graph_error(&l->shape, "more than 255 dimensions");
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
    if (other.storage == key->storage && other.dtype.code == key->dtype.code &&
        other.dtype.bits == key->dtype.bits && other.dtype.lanes == key->dtype.lanes) {
      *same_view = i;
      return;
    }
  }
}

/* Appends a shape: `ndim` dimensions read from the text, or (text == NULL) one dimension. */
static uint32_t append_shape(parser* p, const char* text, uint32_t ndim, int64_t flat) {
  uint32_t at = p->g->num_shape_dims, n = 0, dim;
  mlf_json j;
  if (p->build && text == NULL) p->shapes[at] = flat;
  if (p->build && text != NULL) {
    open_at(p, &j, text, '[');
    while (mlf_json_more(&j, ']', &n) && mlf_json_u32(&j, &dim)) p->shapes[at + n - 1] = dim;
  }
  p->g->num_shape_dims += ndim;
  return at;
}

static uint32_t new_view(parser* p, mlf_json* j, uint32_t storage, DLDataType dtype, uint32_t ndim,
                         uint32_t shape_at) {
  mlf_graph* g = p->g;
  if (g->num_views >= MAX_INDEX) return (uint32_t)graph_error(j, "more than 65535 views");
  if (p->build) p->views[g->num_views] = (mlf_view){storage, shape_at, (uint8_t)ndim, 0, dtype};
  return g->num_views++;
}

static void read_entries(parser* p) {
  entry_lists l;
  mlf_json device;
  entry_key key;
  uint32_t n_device = 0, device_type, same_view, same_shape, shape_at;
  mlf_graph* g = p->g;
  open_lists(p, &l);
  if (p->section[DEVICE_INDEX] != NULL) open_at(p, &device, p->section[DEVICE_INDEX], '[');
  for (uint32_t eid = 0; eid < p->num_entries && read_entry(p, &l, &key); ++eid) {
    if (p->section[DEVICE_INDEX] != NULL) {
      if (!mlf_json_more(&device, ']', &n_device)) {
        graph_error(&device, "device_index shorter than the entries");
      } else if (mlf_json_u32(&device, &device_type) && device_type != kDLCPU) {
        bad(&device, MLF_ERR_UNSUPPORTED, "device_index other than 1 (CPU)", (mlf_name){NULL, 0});
      }
    }
    if (key.storage >= g->num_storage) g->num_storage = key.storage + 1;
    if (p->build && key.bytes > p->storage_bytes[key.storage]) {
      p->storage_bytes[key.storage] = key.bytes;
    }
    find_earlier(p, eid, &key, &same_view, &same_shape);
    if (same_view != UINT32_MAX) {
      if (p->build) p->entry_view[eid] = p->entry_view[same_view];
      continue;
    }
    shape_at = same_shape == UINT32_MAX ? append_shape(p, key.shape, key.ndim, 0)
               : p->build               ? p->views[p->entry_view[same_shape]].shape
                                        : 0;
    uint32_t view = new_view(p, &l.shape, key.storage, key.dtype, key.ndim, shape_at);
    if (p->build) p->entry_view[eid] = view;
  }
  if (mlf_json_more(&l.sid, ']', &l.n_sid) || mlf_json_more(&l.dtype, ']', &l.n_dtype) ||
      mlf_json_more(&l.shape, ']', &l.n_shape) ||
      (p->section[DEVICE_INDEX] != NULL && mlf_json_more(&device, ']', &n_device))) {
    graph_error(&l.sid, "attribute lists longer than the entries");
  }
}

/* ---- arg_nodes, nodes, heads --------------------------------------------------------------- */

static void read_args(parser* p) {
  mlf_json j;
  uint32_t n = 0, nid, first, next;
  open_at(p, &j, p->section[ARG_NODES], '[');
  while (mlf_json_more(&j, ']', &n) && mlf_json_u32(&j, &nid)) {
    if (nid >= p->g->num_nodes || n > MAX_INDEX) {
      graph_error(&j, "bad arg_nodes entry");
    } else if (p->build) {
      row_range(p, nid, &first, &next);
      p->args[n - 1] = (mlf_arg){{NULL, 0}, p->entry_view[first], nid};
    }
  }
  p->g->num_args = n;
}

static void count_func(parser* p, mlf_name name) {
  for (uint32_t i = 0; i < FUNC_CACHE && i < p->g->num_funcs; ++i) {
    if (p->func_cache[i].len == name.len && !memcmp(p->func_cache[i].str, name.str, name.len)) {
      return;
    }
  }
  p->func_cache[p->func_cache_next++ % FUNC_CACHE] = name;
  ++p->g->num_funcs;
}

static uint16_t find_func(parser* p, mlf_name name) {
  uint32_t i = 0;
  while (i < p->g->num_funcs &&
         (p->funcs[i].len != name.len || memcmp(p->funcs[i].str, name.str, name.len))) {
    ++i;
  }
  if (i == p->g->num_funcs) p->funcs[p->g->num_funcs++] = name;
  return (uint16_t)i;
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

static void read_op(parser* p, mlf_json* j, uint32_t nid, const char* inputs, const char* attrs,
                    uint32_t first, uint32_t next) {
  mlf_graph* g = p->g;
  mlf_name func = {NULL, 0}, key, flatten = {NULL, 0};
  mlf_json l;
  uint32_t n = 0, num_inputs = 0, eid, num_outputs = next - first, at = g->num_op_args;
  /* num_inputs/num_outputs attrs are implied by inputs and node_row_ptr: not consulted. */
  if (attrs != NULL) {
    open_at(p, &l, attrs, '{');
    while (mlf_json_more(&l, '}', &n) && mlf_json_key(&l, &key)) {
      if (mlf_name_is(key, "func_name")) {
        mlf_json_string(&l, &func);
      } else if (mlf_name_is(key, "flatten_data")) {
        mlf_json_string(&l, &flatten);
      } else {
        mlf_json_skip(&l);
      }
    }
  }
  int flat = flatten.len == 1 && flatten.str[0] == '1';
  if (inputs != NULL) {
    open_at(p, &l, inputs, '[');
    while (mlf_json_more(&l, ']', &num_inputs) && read_entry_ref(p, &l, nid, &eid)) {
      put_arg(p, &l, at + num_inputs - 1, eid, flat);
    }
  }
  for (uint32_t k = 0; k < num_outputs && !failed(p); ++k) {
    put_arg(p, j, at + num_inputs + k, first + k, flat);
  }
  uint32_t num_args = num_inputs + num_outputs;
  int nop = mlf_name_is(func, "__nop"), copy = nop || mlf_name_is(func, "__copy");
  if (func.str == NULL) graph_error(j, "operator without func_name");
  if (num_args > MAX_INDEX) graph_error(j, "more than 65535 operator arguments");
  if (copy && (num_inputs != 1 || num_outputs != 1)) graph_error(j, "__nop/__copy need 1 in 1 out");
  if (failed(p)) return;
  if (nop && p->build && p->views[p->op_args[at]].storage == p->views[p->op_args[at + 1]].storage) {
    return; /* a reshape in place: the output view already aliases the input */
  }
  /* A __nop whose planner did not share storage must still move the data: a copy. */
  uint16_t index = copy ? MLF_FUNC_COPY : p->build ? find_func(p, func) : 0;
  if (!copy && !p->build) count_func(p, func);
  if (p->build) {
    p->ops[g->num_ops] = (mlf_op){index, (uint16_t)num_args, (uint16_t)num_outputs, 0, at, nid};
  }
  ++g->num_ops;
  g->num_op_args += num_args;
  if (num_args > g->max_op_args) g->max_op_args = num_args;
}

static void read_null(parser* p, mlf_json* j, uint32_t nid, mlf_name name, const char* inputs,
                      uint32_t outputs) {
  mlf_json l;
  uint32_t n = 0;
  if (inputs != NULL) {
    open_at(p, &l, inputs, '[');
    mlf_json_more(&l, ']', &n); /* n becomes 1 if there is any input */
  }
  if (outputs != 1 || n != 0 || name.str == NULL) {
    graph_error(j, "a null node has a name, one output and no inputs");
  }
  for (uint32_t i = 0; p->build && i < p->g->num_args; ++i) {
    if (p->args[i].node == nid) p->args[i].name = name;
  }
}

static void read_node(parser* p, mlf_json* j, uint32_t nid, uint32_t first, uint32_t next) {
  mlf_name op = {NULL, 0}, name = {NULL, 0}, key;
  const char* inputs = NULL;
  const char* attrs = NULL;
  uint32_t n = 0;
  mlf_json_open(j, '{');
  while (mlf_json_more(j, '}', &n) && mlf_json_key(j, &key)) {
    if (mlf_name_is(key, "op")) {
      mlf_json_string(j, &op);
    } else if (mlf_name_is(key, "name")) {
      mlf_json_string(j, &name);
    } else if (mlf_name_is(key, "inputs")) {
      note_value(j, &inputs);
    } else if (mlf_name_is(key, "attrs")) {
      note_value(j, &attrs);
    } else {
      mlf_json_skip(j);
    }
  }
  if (failed(p)) return;
  if (mlf_name_is(op, "null")) {
    read_null(p, j, nid, name, inputs, next - first);
  } else if (mlf_name_is(op, "tvm_op")) {
    read_op(p, j, nid, inputs, attrs, first, next);
  } else {
    bad(j, MLF_ERR_GRAPH, "unknown node op", op);
  }
}

static void read_nodes(parser* p) {
  mlf_json j, rows;
  uint32_t n = 0, n_rows = 0, first = 0, next;
  open_at(p, &j, p->section[NODES], '[');
  open_at(p, &rows, p->section[ROW_PTR], '[');
  mlf_json_more(&rows, ']', &n_rows);
  mlf_json_u32(&rows, &first);
  while (mlf_json_more(&j, ']', &n)) {
    if (n > p->g->num_nodes || !mlf_json_more(&rows, ']', &n_rows) || !mlf_json_u32(&rows, &next)) {
      graph_error(&j, "more nodes than node_row_ptr describes");
      return;
    }
    read_node(p, &j, n - 1, first, next);
    if (failed(p)) {
      if (p->err->node == UINT32_MAX) p->err->node = n - 1;
      return;
    }
    first = next;
  }
  if (n != p->g->num_nodes) graph_error(&j, "fewer nodes than node_row_ptr describes");
  for (uint32_t i = 0; p->build && i < p->g->num_args; ++i) {
    if (p->args[i].name.str == NULL) {
      graph_error(&j, "arg_nodes names an operator node");
      p->err->node = p->args[i].node;
      return;
    }
  }
}

static void read_heads(parser* p) {
  mlf_json j;
  uint32_t n = 0, eid;
  open_at(p, &j, p->section[HEADS], '[');
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
  memset(p->section, 0, sizeof(p->section));
  for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]) && !failed(p); ++i) phases[i](p);
  return p->err->status;
}

/* Places the graph header, its tables and last the temporary entry→view map in mem; with
 * mem == NULL only measures. */
static uint64_t layout(parser* p, uint8_t* mem) {
  const mlf_graph* c = &p->cap;
  const uint64_t sizes[] = {
      sizeof(mlf_graph),
      (uint64_t)c->num_ops * sizeof(mlf_op),
      (uint64_t)c->num_op_args * sizeof(uint16_t),
      (uint64_t)c->num_funcs * sizeof(mlf_name),
      (uint64_t)c->num_views * sizeof(mlf_view),
      (uint64_t)c->num_shape_dims * sizeof(int64_t),
      (uint64_t)c->num_storage * sizeof(uint32_t),
      (uint64_t)c->num_args * sizeof(mlf_arg),
      (uint64_t)c->num_outputs * sizeof(uint32_t),
      (uint64_t)p->num_entries * sizeof(uint32_t),
  };
  uint64_t at[sizeof(sizes) / sizeof(sizes[0]) + 1] = {0};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
    at[i + 1] = at[i] + ((sizes[i] + 7) & ~(uint64_t)7);
  }
  if (mem != NULL) {
    p->g = (mlf_graph*)(void*)mem;
    p->ops = (mlf_op*)(void*)(mem + at[1]);
    p->op_args = (uint16_t*)(void*)(mem + at[2]);
    p->funcs = (mlf_name*)(void*)(mem + at[3]);
    p->views = (mlf_view*)(void*)(mem + at[4]);
    p->shapes = (int64_t*)(void*)(mem + at[5]);
    p->storage_bytes = (uint32_t*)(void*)(mem + at[6]);
    p->args = (mlf_arg*)(void*)(mem + at[7]);
    p->outputs = (uint32_t*)(void*)(mem + at[8]);
    p->entry_view = (uint32_t*)(void*)(mem + at[9]);
  }
  return at[sizeof(sizes) / sizeof(sizes[0])];
}

static mlf_status measure(parser* p, const char* json, size_t json_len, size_t* bytes,
                          mlf_error* err) {
  memset(p, 0, sizeof(*p));
  mlf_error_clear(err);
  if (json == NULL || json_len >= UINT32_MAX) {
    return mlf_fail(err, MLF_ERR_ARGUMENT, "no graph text, or over 4 GiB", NULL, 0);
  }
  p->err = err;
  mlf_json_init(&p->whole, json, json_len, err);
  p->g = &p->cap;
  if (run_pass(p, 0) != MLF_OK) return err->status;
  uint64_t total = layout(p, NULL);
  if (total > SIZE_MAX) return mlf_fail(err, MLF_ERR_NO_MEMORY, "tables too large", NULL, 0);
  *bytes = (size_t)total;
  return MLF_OK;
}

mlf_status mlf_graph_measure_json(const char* json, size_t json_len, size_t* bytes,
                                  mlf_error* err) {
  parser p;
  mlf_error local;
  if (bytes == NULL) return MLF_ERR_ARGUMENT;
  return measure(&p, json, json_len, bytes, err != NULL ? err : &local);
}

mlf_status mlf_graph_parse_json(const char* json, size_t json_len, void* mem, size_t mem_size,
                                const mlf_graph** graph, mlf_error* err) {
  parser p;
  mlf_error local;
  size_t need;
  if (err == NULL) err = &local;
  if (graph == NULL) return MLF_ERR_ARGUMENT;
  *graph = NULL;
  if (measure(&p, json, json_len, &need, err) != MLF_OK) return err->status;
  if (mem == NULL || ((uintptr_t)mem & 7u) != 0) {
    return mlf_fail(err, MLF_ERR_ARGUMENT, "graph memory must be 8-byte aligned", NULL, 0);
  }
  if (mem_size < need) return mlf_fail(err, MLF_ERR_NO_MEMORY, "graph memory too small", NULL, 0);
  memset(mem, 0, need);
  layout(&p, (uint8_t*)mem);
  memset(p.func_cache, 0, sizeof(p.func_cache));
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
