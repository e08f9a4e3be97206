/*
 * mlf_graph_json.c — graph.json → mlf_graph tables, in place.
 *
 * The text is never copied: names stay slices of it, and lists are re-read where they lie.
 * Keys may come in any order, so objects are read in two steps: note where the values of
 * the wanted keys start (skipping the rest), then read those values in dependency order:
 * node_row_ptr, the per-entry attribute lists (walked in lockstep), nodes, arg_nodes, heads.
 * Element i of node_row_ptr or nodes is found by walking its list again: the cost grows with
 * the square of the graph's size, the code does not grow at all.
 *
 * A parse runs that sequence twice over the same text with the same code: a measuring pass
 * that only counts, then a building pass that writes into the caller's memory laid out from
 * those counts. Both passes find duplicate views the same way, by comparing an entry with
 * the earlier entries in the text, so they count alike; the building pass can only come out
 * smaller (__nop operators that vanish, repeated function names the measuring pass counted
 * again), never larger.
 *
 * Structure is checked here; what the tables mean (every view inside its pool, __copy sizes,
 * index ranges, the 16-bit limits) is checked once, by mlf_graph_check(), for parsed and
 * generated tables alike.
 */
#include <string.h>

#include "mlf_internal.h"

/* Every key the parser reads, in slot order. Slots 0-4 belong to the top object, 4-9 to a
 * node (slot 4, "attrs", is reused once the top attrs are read; func_name and flatten_data
 * are found in the node's attrs) and 10-13 to the attrs object (then to its inner lists). */
static const char kKeys[] =
    "nodes\0arg_nodes\0heads\0node_row_ptr\0attrs\0op\0name\0inputs\0func_name\0flatten_data\0"
    "shape\0dltype\0storage_id\0device_index";
enum {
  NODES,
  ARG_NODES,
  HEADS,
  ROW_PTR,
  ATTRS,
  OP,
  NAME,
  INPUTS,
  FUNC_NAME,
  FLATTEN,
  SHAPE, /* the per-entry lists, in lockstep order */
  DLTYPE,
  STORAGE_ID,
  DEVICE_INDEX,
  NUM_KEYS
};
/* Sections a graph cannot do without. */
#define REQUIRED (1u << NODES | 1u << ARG_NODES | 1u << HEADS | 1u << ROW_PTR | 7u << SHAPE)

/* The tables are the parser's to write while it builds them (mlf_graph's pointers are const
 * for everybody else). */
#define BUILT(type, table) ((type*)(uintptr_t)(table))

typedef struct {
  mlf_json whole;
  mlf_error* err;
  int build;
  const char* at[NUM_KEYS]; /* where each key's value starts, NULL when absent */
  uint32_t num_entries;
  mlf_graph* g;         /* counts and tables being built (measuring: &cap) */
  mlf_graph cap;        /* what the measuring pass counted */
  uint32_t* entry_view; /* temporary: the view of every entry */
  mlf_name last_func;   /* measuring: the previous operator's function */
} parser;

typedef struct {
  uint32_t storage;
  DLDataType dtype;
  const char* shape; /* '[' of the shape list in the text */
  uint32_t ndim;
  uint32_t bytes;
} entry_key;

/* The shape, dltype, storage_id and (optional) device_index lists, read in lockstep. */
typedef struct {
  mlf_json list[4];
  uint32_t count[4];
} entry_lists;

static int failed(const parser* p) { return p->err->status != MLF_OK; }

/* A cursor at `at`, past the bracket `open` (none when 0). */
static void open_at(const parser* p, mlf_json* j, const char* at, char open) {
  *j = p->whole;
  j->pos = at;
  if (open) mlf_json_open(j, open);
}

static int graph_error(mlf_json* j, mlf_why why) {
  return mlf_json_fail_as(j, MLF_ERR_GRAPH, why, NULL);
}

/* A cursor at element `index` of the list at `list`; 0 when the list is shorter. */
static int nth(const parser* p, mlf_json* j, const char* list, uint32_t index) {
  uint32_t n = 0;
  open_at(p, j, list, '[');
  while (mlf_json_more(j, &n) && n <= index) mlf_json_skip(j);
  return n == index + 1;
}

/* Element `index` of the validated node_row_ptr. */
static uint32_t row_ptr(const parser* p, uint32_t index) {
  mlf_json j;
  uint32_t value = 0;
  if (nth(p, &j, p->at[ROW_PTR], index)) mlf_json_u32(&j, &value);
  return value;
}

/* Notes where the values of keys [first, last) start in the object at the cursor (consumed);
 * other keys (metadata, hash, layouts, storage_scope, ...) are skipped. */
static void note_members(parser* p, mlf_json* j, int first, int last) {
  uint32_t count = 0;
  mlf_name key;
  for (int i = first; i < last; ++i) p->at[i] = NULL;
  mlf_json_open(j, '{');
  while (mlf_json_more(j, &count) && mlf_json_string(j, &key)) {
    if (mlf_json_peek(j) == ':') {
      ++j->pos;
    } else {
      mlf_json_fail(j, MLF_WHY_MISSING_COLON);
    }
    mlf_json_peek(j);
    const char* k = kKeys;
    for (int i = 0; i < last; ++i, k += mlf_cstr_length(k, sizeof(kKeys)) + 1) {
      if (i >= first && mlf_name_is(key, k)) p->at[i] = j->pos;
    }
    mlf_json_skip(j);
  }
}

/* The string value of key `slot` ({NULL, 0} when absent). */
static mlf_name string_at(const parser* p, int slot) {
  mlf_name s = {NULL, 0};
  mlf_json j;
  if (p->at[slot] != NULL) {
    open_at(p, &j, p->at[slot], '\0');
    mlf_json_string(&j, &s);
  }
  return s;
}

/* Notes the members of node nid (op, name, inputs, attrs and in those func_name and
 * flatten_data); returns its op. */
static mlf_name note_node(parser* p, mlf_json* j) {
  note_members(p, j, ATTRS, FLATTEN + 1);
  if (p->at[ATTRS] != NULL) {
    mlf_json attrs;
    open_at(p, &attrs, p->at[ATTRS], '\0');
    note_members(p, &attrs, FUNC_NAME, FLATTEN + 1);
  }
  return string_at(p, OP);
}

static void find_sections(parser* p) {
  mlf_json j = p->whole;
  mlf_name type;
  uint32_t n;
  note_members(p, &j, NODES, ATTRS + 1);
  if (mlf_json_peek(&j) >= 0) mlf_json_fail(&j, MLF_WHY_TRAILING_TEXT);
  p->at[SHAPE] = p->at[DLTYPE] = p->at[STORAGE_ID] = p->at[DEVICE_INDEX] = NULL;
  if (p->at[ATTRS] != NULL) {
    open_at(p, &j, p->at[ATTRS], '\0');
    note_members(p, &j, SHAPE, DEVICE_INDEX + 1);
  }
  const char* key = kKeys;
  for (int i = 0; i < NUM_KEYS; ++i, key += mlf_cstr_length(key, sizeof(kKeys)) + 1) {
    if (p->at[i] == NULL && (REQUIRED >> i & 1u)) {
      mlf_name section = {key, (uint32_t)mlf_cstr_length(key, sizeof(kKeys))};
      mlf_json_fail_as(&j, MLF_ERR_GRAPH, MLF_WHY_MISSING_SECTION, &section);
    }
    if (p->at[i] != NULL && i >= SHAPE) {
      /* ["list_<type>", [...]]: keep where the inner list starts */
      open_at(p, &j, p->at[i], '[');
      n = 0;
      if (!mlf_json_more(&j, &n) || !mlf_json_string(&j, &type) || !mlf_json_more(&j, &n)) {
        graph_error(&j, MLF_WHY_ATTR_LIST);
      }
      mlf_json_peek(&j);
      p->at[i] = j.pos;
    }
  }
}

static void read_row_ptr(parser* p) {
  mlf_json j;
  uint32_t n = 0, value = 0, previous = 0;
  open_at(p, &j, p->at[ROW_PTR], '[');
  while (mlf_json_more(&j, &n) && mlf_json_u32(&j, &value)) {
    if ((n == 1 && value != 0) || value < previous) break;
    previous = value;
  }
  if (n == 0 || previous != value) graph_error(&j, MLF_WHY_ROW_PTR);
  p->g->num_nodes = n - 1;
  p->num_entries = previous;
}

/* A reference at the cursor, nid (output 0) or [nid, index(, version)], naming an output of
 * a node before `limit`: ref[0] = nid, ref[1] = the entry. */
static int read_entry_ref(parser* p, mlf_json* j, uint32_t limit, uint32_t ref[2]) {
  uint32_t n = 0, index = 0;
  ref[0] = limit; /* a list too short is refused below */
  if (mlf_json_peek(j) != '[') {
    mlf_json_u32(j, &ref[0]);
  } else {
    mlf_json_open(j, '[');
    while (mlf_json_more(j, &n)) {
      if (n > 2) {
        mlf_json_skip(j); /* the version */
      } else {
        mlf_json_u32(j, n == 1 ? &ref[0] : &index);
      }
    }
    if (n < 2) ref[0] = limit;
  }
  if (failed(p)) return 0;
  ref[1] = row_ptr(p, ref[0]) + index;
  if (ref[0] >= limit || ref[1] >= row_ptr(p, ref[0] + 1)) {
    return graph_error(j, MLF_WHY_BAD_REFERENCE);
  }
  return 1;
}

/* ---- entries ----------------------------------------------------------------------------- */

/* (int|uint|float|handle|bfloat)<bits>[x<lanes>], bool, handle. */
static int parse_dtype(mlf_name s, DLDataType* t) {
  /* In type code order (kDLInt, kDLUInt, kDLFloat, kDLOpaqueHandle, kDLBfloat), then bool. */
  static const char kPrefixes[] = "int\0uint\0float\0handle\0bfloat\0bool";
  const char* prefix = kPrefixes;
  uint32_t at, code = 0, number[2] = {0, 1}, k = 0;
  /* the prefix the name starts with, followed by its end or a digit */
  for (;; ++code, prefix += at + 1) {
    if (code > 5) return 0;
    for (at = 0; prefix[at] != '\0' && at < s.len && s.str[at] == prefix[at]; ++at) continue;
    if (prefix[at] == '\0' && (at == s.len || (unsigned)(s.str[at] - '0') < 10)) break;
    while (prefix[at] != '\0') ++at;
  }
  if (at == s.len && code == kDLOpaqueHandle) number[0] = 64; /* "handle" */
  if (at == s.len && code == 5) {                             /* "bool" */
    code = kDLUInt;
    number[0] = 1;
  }
  for (; at < s.len; ++at) {
    unsigned c = (unsigned)s.str[at] - '0';
    if (c < 10 && number[k] < 0x10000) {
      number[k] = number[k] * 10 + c;
    } else if (s.str[at] == 'x' && k == 0) {
      number[++k] = 0;
    } else {
      return 0;
    }
  }
  /* bits in 1..255, lanes in 1..65535 (wrap-around turns 0 into a huge value); "bool" takes
   * no bits of its own */
  if (code == 5 || number[0] - 1 > 254 || number[1] - 1 > 0xFFFE) return 0;
  *t = (DLDataType){(uint8_t)code, (uint8_t)number[0], (uint16_t)number[1]};
  return 1;
}

static void open_lists(const parser* p, entry_lists* l) {
  for (int i = 0; i < 4; ++i) {
    l->count[i] = 0;
    if (p->at[SHAPE + i] != NULL) open_at(p, &l->list[i], p->at[SHAPE + i], '[');
  }
}

/* Reads the next entry's storage id, dtype and shape (kept as a position in the text), and
 * checks its device. */
static int read_entry(parser* p, entry_lists* l, entry_key* key) {
  mlf_json* shape = &l->list[0];
  mlf_name text;
  uint32_t n = 0, dim, device = kDLCPU;
  for (int i = 0; i < 4; ++i) {
    if (p->at[SHAPE + i] != NULL && !mlf_json_more(&l->list[i], &l->count[i])) {
      return graph_error(&l->list[i], MLF_WHY_LISTS_DISAGREE);
    }
  }
  mlf_json_string(&l->list[1], &text);
  mlf_json_u32(&l->list[2], &key->storage);
  if (p->at[DEVICE_INDEX] != NULL) mlf_json_u32(&l->list[3], &device);
  if (failed(p)) return 0;
  if (key->storage >= p->num_entries) {
    return graph_error(&l->list[2], MLF_WHY_STORAGE_ID);
  }
  if (device != kDLCPU) {
    return mlf_json_fail_as(&l->list[3], MLF_ERR_UNSUPPORTED, MLF_WHY_DEVICE, NULL);
  }
  if (!parse_dtype(text, &key->dtype)) {
    return mlf_json_fail_as(&l->list[1], MLF_ERR_GRAPH, MLF_WHY_DTYPE, &text);
  }
  /* 32-bit arithmetic: a view over 4 GiB makes mlf_graph_check() refuse the graph anyway */
  uint32_t bytes = (uint32_t)mlf_dtype_bytes(key->dtype);
  mlf_json_peek(shape);
  key->shape = shape->pos;
  mlf_json_open(shape, '[');
  while (mlf_json_more(shape, &n) && mlf_json_u32(shape, &dim)) {
    bytes *= dim;
    if (n > 255) return graph_error(shape, MLF_WHY_SHAPE);
  }
  key->ndim = n;
  key->bytes = bytes;
  return !failed(p);
}

/* Two validated shape lists are equal when their text is, blanks aside (numbers have no
 * leading zeros, see mlf_json_u32). */
static int same_shape_text(const char* a, const char* b) {
  for (;;) {
    while ((unsigned char)*a <= ' ') ++a;
    while ((unsigned char)*b <= ' ') ++b;
    if (*a != *b) return 0;
    if (*a == ']') return 1;
    ++a;
    ++b;
  }
}

/* The first earlier entry with the same (storage, dtype, shape), or UINT32_MAX. */
static uint32_t find_earlier(parser* p, uint32_t eid, const entry_key* key) {
  entry_lists l;
  entry_key other;
  open_lists(p, &l);
  for (uint32_t i = 0; i < eid && read_entry(p, &l, &other); ++i) {
    if (other.storage == key->storage && mlf_same_dtype(other.dtype, key->dtype) &&
        same_shape_text(other.shape, key->shape)) {
      return i;
    }
  }
  return UINT32_MAX;
}

/* Appends the view of `key`: its dimensions read from the text at key->shape, or (shape NULL)
 * the one dimension `flat`. Returns its index. */
static uint32_t new_view(parser* p, const entry_key* key, int64_t flat) {
  /* A storage id above 65534 is cut to 16 bits here, but it makes num_storage exceed the
   * limit mlf_graph_check() refuses before any view is used. */
  mlf_graph* g = p->g;
  uint32_t at = g->num_shape_dims, n = 0, dim;
  mlf_json l;
  g->num_shape_dims += key->ndim;
  if (p->build) {
    int64_t* shapes = BUILT(int64_t, g->shapes) + at;
    BUILT(mlf_view, g->views)
    [g->num_views] = (mlf_view){at, (uint16_t)key->storage, (uint8_t)key->ndim, 0, key->dtype};
    if (key->shape == NULL) {
      *shapes = flat; /* a flattened view's one dimension */
    } else {
      open_at(p, &l, key->shape, '[');
      while (mlf_json_more(&l, &n) && mlf_json_u32(&l, &dim)) shapes[n - 1] = dim;
    }
  }
  return g->num_views++;
}

static void read_entries(parser* p) {
  entry_lists l;
  entry_key key;
  uint32_t eid, view;
  mlf_graph* g = p->g;
  open_lists(p, &l);
  for (eid = 0; eid < p->num_entries && read_entry(p, &l, &key); ++eid) {
    if (key.storage >= g->num_storage) g->num_storage = key.storage + 1;
    view = find_earlier(p, eid, &key);
    if (p->build) {
      uint32_t* pool = BUILT(uint32_t, g->storage_bytes) + key.storage;
      if (key.bytes > *pool) *pool = key.bytes;
      if (view != UINT32_MAX) view = p->entry_view[view];
    }
    if (view == UINT32_MAX) view = new_view(p, &key, 0);
    if (p->build) p->entry_view[eid] = view;
  }
  /* Every list must end with the entries (device_index included, when present). */
  for (int i = 0; i < 4; ++i) {
    if (p->at[SHAPE + i] != NULL && mlf_json_more(&l.list[i], &l.count[i])) {
      graph_error(&l.list[i], MLF_WHY_LISTS_DISAGREE);
    }
  }
}

/* ---- nodes, arg_nodes, heads ---------------------------------------------------------------- */

/* Building: the index of the function (added if new). Measuring: counts every name that
 * differs from the previous operator's, an upper bound of the distinct names. */
static uint16_t func_index(parser* p, mlf_name name) {
  mlf_graph* g = p->g;
  mlf_name* names = p->build ? BUILT(mlf_name, g->funcs) : &p->last_func;
  uint32_t known = p->build ? g->num_funcs : g->num_funcs != 0, i = 0;
  while (i < known && !mlf_name_equal(names[i], name)) ++i;
  if (i < known) return (uint16_t)i;
  names[p->build ? i : 0] = name;
  return (uint16_t)g->num_funcs++;
}

/* Writes argument `index` of the op being read: the entry's view, or for flatten_data="1"
 * a fresh one-dimensional view of the same storage (not deduplicated: Relay never emits it). */
static void put_arg(parser* p, uint32_t index, uint32_t eid, int flatten) {
  const mlf_graph* g = p->g;
  uint32_t v = p->build ? p->entry_view[eid] : 0;
  if (flatten) {
    entry_key flat = {0, {0, 0, 0}, NULL, 1, 0};
    int64_t elements = 1;
    if (p->build) {
      const mlf_view* w = &g->views[v];
      flat.storage = w->storage;
      flat.dtype = w->dtype;
      for (uint32_t d = 0; d < w->ndim; ++d) elements *= g->shapes[w->shape + d];
    }
    v = new_view(p, &flat, elements);
  }
  if (p->build) BUILT(uint16_t, g->op_args)[index] = (uint16_t)v;
}

/* An operator node whose n inputs are already in op_args; first: its first entry. */
static void read_op(parser* p, mlf_json* j, uint32_t nid, uint32_t n, uint32_t first,
                    uint32_t outputs, int flat) {
  mlf_graph* g = p->g;
  uint32_t at = g->num_op_args, num_args = n + outputs;
  mlf_name func = string_at(p, FUNC_NAME);
  while (n < num_args) put_arg(p, at + n++, first++, flat);
  /* 2: __nop, 1: __copy, 0: a function of the system library */
  int kind = mlf_name_is(func, "__nop") ? 2 : mlf_name_is(func, "__copy");
  /* A __nop or __copy not one to one becomes a copy mlf_graph_check() refuses. */
  if (func.str == NULL) graph_error(j, MLF_WHY_FUNC_NAME);
  if (failed(p)) return;
  if (kind == 2 && p->build && num_args == 2 &&
      g->views[g->op_args[at]].storage == g->views[g->op_args[at + 1]].storage) {
    return; /* a reshape in place: the output view already aliases the input */
  }
  /* A __nop whose planner did not share storage must still move the data: a copy. */
  uint16_t index = kind != 0 ? MLF_FUNC_COPY : func_index(p, func);
  if (p->build) {
    BUILT(mlf_op, g->ops)
    [g->num_ops] = (mlf_op){index, (uint16_t)num_args, (uint16_t)outputs, 0, at, nid};
  }
  ++g->num_ops;
  g->num_op_args += num_args;
  if (num_args > g->max_op_args) g->max_op_args = num_args;
}

static void read_nodes(parser* p) {
  mlf_json j, l;
  uint32_t n = 0, inputs = 0;
  open_at(p, &j, p->at[NODES], '[');
  while (n < p->g->num_nodes && mlf_json_more(&j, &n)) {
    uint32_t nid = n - 1, first = row_ptr(p, nid), outputs = row_ptr(p, n) - first, ref[2];
    mlf_name op = note_node(p, &j);
    /* num_inputs/num_outputs attrs are implied by inputs and node_row_ptr: not consulted. */
    int flat = mlf_name_is(string_at(p, FLATTEN), "1");
    inputs = 0;
    if (p->at[INPUTS] != NULL) {
      open_at(p, &l, p->at[INPUTS], '[');
      while (mlf_json_more(&l, &inputs) && read_entry_ref(p, &l, nid, ref)) {
        put_arg(p, p->g->num_op_args + inputs - 1, ref[1], flat);
      }
    }
    if (mlf_name_is(op, "tvm_op")) {
      read_op(p, &j, nid, inputs, first, outputs, flat);
    } else if (mlf_name_is(op, "null")) {
      if (outputs != 1 || inputs != 0 || p->at[NAME] == NULL) {
        graph_error(&j, MLF_WHY_NULL_NODE);
      }
      for (uint32_t i = 0; p->build && i < p->g->num_args; ++i) {
        mlf_arg* arg = BUILT(mlf_arg, p->g->args) + i;
        if (arg->node == nid) arg->name = string_at(p, NAME);
      }
    } else {
      mlf_json_fail_as(&j, MLF_ERR_GRAPH, MLF_WHY_NODE_OP, &op);
    }
    if (failed(p) && p->err->node == UINT32_MAX) p->err->node = nid;
  }
  if (n != p->g->num_nodes || mlf_json_more(&j, &n)) {
    graph_error(&j, MLF_WHY_NODES_DISAGREE);
  }
  for (uint32_t i = 0; p->build && i < p->g->num_args && !failed(p); ++i) {
    if (p->g->args[i].name.str == NULL) {
      graph_error(&j, MLF_WHY_ARG_NODE);
      p->err->node = p->g->args[i].node;
    }
  }
}

/* arg_nodes (as references to output 0 of their nodes) and heads. */
static void read_args_and_heads(parser* p) {
  mlf_graph* g = p->g;
  for (int slot = ARG_NODES; slot <= HEADS; ++slot) {
    mlf_json j;
    uint32_t n = 0, ref[2];
    open_at(p, &j, p->at[slot], '[');
    while (mlf_json_more(&j, &n) && read_entry_ref(p, &j, g->num_nodes, ref)) {
      if (!p->build) continue;
      uint32_t view = p->entry_view[ref[1]];
      if (slot == HEADS) {
        BUILT(uint32_t, g->outputs)[n - 1] = view;
      } else { /* named when its node is read */
        BUILT(mlf_arg, g->args)[n - 1] = (mlf_arg){{NULL, 0}, view, ref[0]};
      }
    }
    if (slot == HEADS) {
      g->num_outputs = n;
    } else {
      g->num_args = n;
    }
  }
}

/* ---- passes and memory layout ---------------------------------------------------------------- */

/* Reads the text in dependency order: measuring into p->cap, or building into p->g. A phase
 * after a failure finds every scanner call failing at once (failures are sticky). */
static int run_pass(parser* p, int build) {
  p->build = build;
  find_sections(p);
  read_row_ptr(p);
  read_entries(p);
  read_args_and_heads(p);
  read_nodes(p);
  return !failed(p);
}

/* Places the graph header, its tables (as measured) and last the temporary entry→view map
 * from mem; returns the bytes they take (mem NULL: only that). The text is under 256 MiB and
 * every count is below its length, so 32-bit arithmetic cannot overflow. */
static size_t layout(parser* p, uint8_t* mem) {
  size_t at = MLF_ALIGN_UP(sizeof(mlf_graph), 8);
  for (int i = 0; i < MLF_GRAPH_TABLES; ++i) {
    uint32_t count;
    void* table = (void*)((uintptr_t)mem + at); /* integer arithmetic: mem may be NULL */
    memcpy(&count, (const uint8_t*)&p->cap + mlf_graph_tables[i][0], sizeof(count));
    if (mem != NULL) memcpy(mem + mlf_graph_tables[i][1], &table, sizeof(table));
    at += MLF_ALIGN_UP(count * mlf_graph_tables[i][2], 8);
  }
  p->g = (mlf_graph*)mem;
  p->entry_view = (uint32_t*)((uintptr_t)mem + at);
  return at + MLF_ALIGN_UP(p->num_entries * sizeof(uint32_t), 8);
}

/* Measures (graph NULL: *size gets the bytes needed) or parses into mem of *size bytes. */
static mlf_status parse(const char* json, size_t json_len, void* mem, size_t* size,
                        const mlf_graph** graph, mlf_error* err) {
  parser p;
  memset(&p, 0, sizeof(p));
  mlf_error_clear(err);
  if (json == NULL || size == NULL || json_len >= MLF_JSON_MAX_BYTES) {
    return mlf_fail(err, MLF_ERR_ARGUMENT, MLF_WHY_GRAPH_ARGUMENT);
  }
  p.err = err;
  p.whole = (mlf_json){json, json + json_len, json, err};
  p.g = &p.cap;
  if (!run_pass(&p, 0)) return err->status;
  size_t need = layout(&p, NULL);
  if (graph == NULL) {
    *size = need;
  } else if (mem == NULL || ((uintptr_t)mem & 7u) != 0) {
    mlf_fail(err, MLF_ERR_ARGUMENT, MLF_WHY_GRAPH_MEMORY_ALIGN);
  } else if (*size < need) {
    mlf_fail(err, MLF_ERR_NO_MEMORY, MLF_WHY_GRAPH_MEMORY_SMALL);
  } else {
    memset(mem, 0, need);
    layout(&p, (uint8_t*)mem);
    if (run_pass(&p, 1) && mlf_graph_check(p.g, err) == MLF_OK) *graph = p.g;
  }
  return err->status;
}

mlf_status mlf_graph_measure_json(const char* json, size_t json_len, size_t* bytes,
                                  mlf_error* err) {
  mlf_error local;
  return parse(json, json_len, NULL, bytes, NULL, err != NULL ? err : &local);
}

mlf_status mlf_graph_parse_json(const char* json, size_t json_len, void* mem, size_t mem_size,
                                const mlf_graph** graph, mlf_error* err) {
  mlf_error local;
  if (graph == NULL) return MLF_ERR_ARGUMENT;
  *graph = NULL;
  return parse(json, json_len, mem, &mem_size, graph, err != NULL ? err : &local);
}
