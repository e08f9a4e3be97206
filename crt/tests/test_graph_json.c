/*
 * test_graph_json.c — mlf_graph_measure_json / mlf_graph_parse_json: the tables they build,
 * their tolerance (key order, unknown keys and attrs, long names) and their refusals
 * (hostile text gives an error status, never a crash — run under ASan/UBSan).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_graphs.h"
#include "test_util.h"

/* Parses into a right-sized heap buffer; the caller frees *mem. */
static mlf_status parse(const char* json, size_t len, void** mem, const mlf_graph** g,
                        mlf_error* err) {
  size_t bytes = 0;
  *mem = NULL;
  *g = NULL;
  mlf_status status = mlf_graph_measure_json(json, len, &bytes, err);
  if (status != MLF_OK) return status;
  *mem = malloc(bytes);
  return mlf_graph_parse_json(json, len, *mem, bytes, g, err);
}

static int same_name(mlf_name a, mlf_name b) {
  return a.len == b.len && memcmp(a.str, b.str, a.len) == 0;
}

/* Equality of two graphs' tables: field by field, except that where a view's dimensions
 * sit in the shapes table is free (the parser does not share dimensions between views). */
static void check_same_tables(const mlf_graph* a, const mlf_graph* b) {
  CHECK_EQ_INT(a->num_nodes, b->num_nodes);
  CHECK_EQ_INT(a->num_ops, b->num_ops);
  CHECK_EQ_INT(a->num_op_args, b->num_op_args);
  CHECK_EQ_INT(a->max_op_args, b->max_op_args);
  CHECK_EQ_INT(a->num_funcs, b->num_funcs);
  CHECK_EQ_INT(a->num_views, b->num_views);
  CHECK_EQ_INT(a->num_storage, b->num_storage);
  CHECK_EQ_INT(a->num_args, b->num_args);
  CHECK_EQ_INT(a->num_outputs, b->num_outputs);
  if (g_test_failures) return;
  CHECK(memcmp(a->ops, b->ops, a->num_ops * sizeof(mlf_op)) == 0);
  CHECK(memcmp(a->op_args, b->op_args, a->num_op_args * sizeof(uint16_t)) == 0);
  for (uint32_t i = 0; i < a->num_views; ++i) {
    const mlf_view *v = &a->views[i], *w = &b->views[i];
    CHECK(v->storage == w->storage && v->ndim == w->ndim && v->dtype.code == w->dtype.code &&
          v->dtype.bits == w->dtype.bits && v->dtype.lanes == w->dtype.lanes);
    CHECK(v->ndim == w->ndim &&
          memcmp(a->shapes + v->shape, b->shapes + w->shape, v->ndim * sizeof(int64_t)) == 0);
  }
  CHECK(memcmp(a->storage_bytes, b->storage_bytes, a->num_storage * sizeof(uint32_t)) == 0);
  CHECK(memcmp(a->outputs, b->outputs, a->num_outputs * sizeof(uint32_t)) == 0);
  for (uint32_t i = 0; i < a->num_funcs; ++i) CHECK(same_name(a->funcs[i], b->funcs[i]));
  for (uint32_t i = 0; i < a->num_args; ++i) {
    CHECK(same_name(a->args[i].name, b->args[i].name));
    CHECK_EQ_INT(a->args[i].view, b->args[i].view);
    CHECK_EQ_INT(a->args[i].node, b->args[i].node);
  }
}

static void test_basic_tables(void) {
  char* json = json_from(kBasicJson);
  void* mem;
  const mlf_graph* g;
  mlf_error err;
  CHECK_STATUS(parse(json, strlen(json), &mem, &g, &err), MLF_OK, &err);
  if (g != NULL) check_same_tables(g, &kBasicTables);
  /* Names are slices of the text, not copies. */
  if (g != NULL) CHECK(g->funcs[0].str > json && g->funcs[0].str < json + strlen(json));
  free(mem);
  free(json);
}

static void test_shuffled_keys_and_unknowns(void) {
  char* json = json_from(kBasicShuffledJson);
  void* mem;
  const mlf_graph* g;
  mlf_error err;
  CHECK_STATUS(parse(json, strlen(json), &mem, &g, &err), MLF_OK, &err);
  if (g != NULL) check_same_tables(g, &kBasicTables);
  free(mem);
  free(json);
}

static void test_measure_is_exact_for_chain(void) {
  char* json = chain_json(400);
  void* mem;
  const mlf_graph* g;
  mlf_error err;
  size_t bytes;
  CHECK_STATUS(mlf_graph_measure_json(json, strlen(json), &bytes, &err), MLF_OK, &err);
  CHECK_STATUS(parse(json, strlen(json), &mem, &g, &err), MLF_OK, &err);
  if (g != NULL) {
    CHECK_EQ_INT(g->num_ops, 400);
    CHECK_EQ_INT(g->num_views, 3);
    CHECK_EQ_INT(g->num_funcs, 1);
    CHECK_EQ_INT(g->num_shape_dims, 6); /* [1, 256] for each of the three views */
    CHECK_EQ_INT(g->num_storage, 3);
    /* Tables + the 4-byte-per-entry temporary, nothing else. */
    size_t expected = MLF_ALIGN_UP(sizeof(mlf_graph), 8) + MLF_ALIGN_UP(400 * sizeof(mlf_op), 8) +
                      MLF_ALIGN_UP(1200 * 2, 8) + MLF_ALIGN_UP(sizeof(mlf_name), 8) +
                      MLF_ALIGN_UP(3 * sizeof(mlf_view), 8) + 48 + 16 +
                      MLF_ALIGN_UP(sizeof(mlf_arg), 8) + 8 + MLF_ALIGN_UP(401 * 4, 8);
    CHECK_EQ_INT(bytes, expected);
  }
  free(mem);
  free(json);
}

static void test_long_names(void) {
  const char* param_name;
  char* json = long_names_json(&param_name);
  void* mem;
  const mlf_graph* g;
  mlf_error err;
  CHECK_STATUS(parse(json, strlen(json), &mem, &g, &err), MLF_OK, &err);
  if (g != NULL) {
    CHECK_EQ_INT(g->args[1].name.len, 200);
    CHECK(memcmp(g->args[1].name.str, param_name, 200) == 0);
    CHECK_EQ_INT(g->funcs[0].len, strlen(LONG_FUNC_NAME));
  }
  free(mem);
  free(json);
}

static void test_scalar_and_flatten(void) {
  char* json = json_from(kScalarJson);
  void* mem;
  const mlf_graph* g;
  mlf_error err;
  CHECK_STATUS(parse(json, strlen(json), &mem, &g, &err), MLF_OK, &err);
  if (g != NULL) {
    CHECK_EQ_INT(g->views[0].ndim, 0);
    CHECK_EQ_INT(g->storage_bytes[0], 4); /* a scalar holds one element */
  }
  free(mem);
  free(json);

  json = json_from(kFlattenJson);
  CHECK_STATUS(parse(json, strlen(json), &mem, &g, &err), MLF_OK, &err);
  if (g != NULL) {
    const uint16_t* args = g->op_args + g->ops[0].first_arg;
    for (int k = 0; k < 2; ++k) {
      const mlf_view* v = &g->views[args[k]];
      CHECK_EQ_INT(v->ndim, 1);
      CHECK_EQ_INT(g->shapes[v->shape], 4);
    }
    /* The graph's own views keep their shapes: the outputs are [2,2]. */
    CHECK_EQ_INT(g->views[g->outputs[0]].ndim, 2);
  }
  free(mem);
  free(json);
}

static void test_nop_between_storages_becomes_copy(void) {
  char* json = json_from(
      "{'nodes': [{'op': 'null', 'name': 'x', 'inputs': []}, {'op': 'tvm_op', 'name': 'r', "
      "'attrs': {'func_name': '__nop'}, 'inputs': [[0,0,0]]}], 'arg_nodes': [0], 'heads': "
      "[[1,0,0]], 'attrs': {'dltype': ['list_str', ['int8','int8']], 'storage_id': ['list_int',"
      " [0,1]], 'shape': ['list_shape', [[2,3],[6]]]}, 'node_row_ptr': [0,1,2]}");
  void* mem;
  const mlf_graph* g;
  mlf_error err;
  CHECK_STATUS(parse(json, strlen(json), &mem, &g, &err), MLF_OK, &err);
  if (g != NULL) {
    CHECK_EQ_INT(g->num_ops, 1);
    CHECK_EQ_INT(g->ops[0].func, MLF_FUNC_COPY);
    CHECK_EQ_INT(g->num_funcs, 0);
  }
  free(mem);
  free(json);
}

static void test_dtypes(void) {
  static const struct {
    const char* text;
    uint8_t code, bits;
    uint16_t lanes;
    uint32_t bytes; /* of a [3] tensor */
  } cases[] = {
      {"int8", kDLInt, 8, 1, 3},          {"uint16", kDLUInt, 16, 1, 6},
      {"float32", kDLFloat, 32, 1, 12},   {"float16", kDLFloat, 16, 1, 6},
      {"bfloat16", kDLBfloat, 16, 1, 6},  {"int64", kDLInt, 64, 1, 24},
      {"bool", kDLUInt, 1, 1, 3},         {"handle", kDLOpaqueHandle, 64, 1, 24},
      {"float32x4", kDLFloat, 32, 4, 48}, {"int4", kDLInt, 4, 1, 3},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    char text[512];
    snprintf(text, sizeof(text),
             "{'nodes': [{'op': 'null', 'name': 'x', 'inputs': []}], 'arg_nodes': [0], "
             "'heads': [[0,0,0]], 'attrs': {'dltype': ['list_str', ['%s']], 'storage_id': "
             "['list_int', [0]], 'shape': ['list_shape', [[3]]]}, 'node_row_ptr': [0,1]}",
             cases[i].text);
    char* json = json_from(text);
    void* mem;
    const mlf_graph* g;
    mlf_error err;
    CHECK_STATUS(parse(json, strlen(json), &mem, &g, &err), MLF_OK, &err);
    if (g != NULL) {
      CHECK_EQ_INT(g->views[0].dtype.code, cases[i].code);
      CHECK_EQ_INT(g->views[0].dtype.bits, cases[i].bits);
      CHECK_EQ_INT(g->views[0].dtype.lanes, cases[i].lanes);
      CHECK_EQ_INT(g->storage_bytes[0], cases[i].bytes);
    }
    free(mem);
    free(json);
  }
}

static void test_memory_rules(void) {
  char* json = json_from(kBasicJson);
  size_t len = strlen(json), bytes;
  const mlf_graph* g;
  mlf_error err;
  CHECK_STATUS(mlf_graph_measure_json(json, len, &bytes, &err), MLF_OK, &err);
  uint64_t* mem = (uint64_t*)malloc(bytes + 8);
  CHECK_STATUS(mlf_graph_parse_json(json, len, mem, bytes - 1, &g, &err), MLF_ERR_NO_MEMORY, &err);
  CHECK(g == NULL);
  CHECK_STATUS(mlf_graph_parse_json(json, len, (char*)mem + 4, bytes, &g, &err), MLF_ERR_ARGUMENT,
               &err);
  CHECK_STATUS(mlf_graph_parse_json(json, len, mem, bytes, &g, NULL), MLF_OK, NULL);
  CHECK_STATUS(mlf_graph_parse_json(NULL, 0, mem, bytes, &g, &err), MLF_ERR_ARGUMENT, &err);
  CHECK_STATUS(mlf_graph_parse_json(json, len, mem, bytes, NULL, &err), MLF_ERR_ARGUMENT, NULL);
  CHECK_STATUS(mlf_graph_measure_json(json, len, NULL, &err), MLF_ERR_ARGUMENT, NULL);
  free(mem);
  free(json);
}

/* Every proper prefix of a graph is an error, never a crash or a success. */
static void test_truncated_everywhere(void) {
  char* json = json_from(kBasicShuffledJson);
  size_t len = strlen(json);
  for (size_t cut = 0; cut < len; ++cut) {
    char* prefix = (char*)malloc(cut + 1); /* exact size: ASan sees any overread */
    memcpy(prefix, json, cut);
    size_t bytes;
    mlf_error err;
    mlf_status status = mlf_graph_measure_json(prefix, cut, &bytes, &err);
    if (status == MLF_OK) {
      fprintf(stderr, "prefix of %zu bytes accepted\n", cut);
      CHECK(status != MLF_OK);
    }
    CHECK(err.offset <= cut || err.offset == UINT32_MAX);
    free(prefix);
  }
  free(json);
}

typedef struct {
  const char* description;
  const char* from; /* replaced once in kBasicJson ... */
  const char* to;   /* ... by this */
  mlf_status expected;
} mutation;

static const mutation kMutations[] = {
    {"storage id as string", "[0, 1, 2, 2, 3, 4, 5, 2]", "[0, '1', 2, 2, 3, 4, 5, 2]",
     MLF_ERR_GRAPH},
    {"storage id negative", "[0, 1, 2, 2, 3, 4, 5, 2]", "[0, -1, 2, 2, 3, 4, 5, 2]", MLF_ERR_GRAPH},
    {"storage id huge", "[0, 1, 2, 2, 3, 4, 5, 2]", "[0, 4294967295, 2, 2, 3, 4, 5, 2]",
     MLF_ERR_GRAPH},
    {"storage id too large", "[0, 1, 2, 2, 3, 4, 5, 2]", "[0, 99999999999999999999, 2, 2, 3]",
     MLF_ERR_GRAPH},
    {"storage id fraction", "[0, 1, 2, 2, 3, 4, 5, 2]", "[0, 1.5, 2, 2, 3, 4, 5, 2]",
     MLF_ERR_GRAPH},
    {"short storage list", "[0, 1, 2, 2, 3, 4, 5, 2]", "[0, 1, 2, 2, 3, 4, 5]", MLF_ERR_GRAPH},
    {"long storage list", "[0, 1, 2, 2, 3, 4, 5, 2]", "[0, 1, 2, 2, 3, 4, 5, 2, 0]", MLF_ERR_GRAPH},
    {"unknown dtype", "'float32', 'float32', 'float32', 'float32', 'float32', 'float32'",
     "'float32', 'float32', 'float8e4', 'float32', 'float32', 'float32'", MLF_ERR_GRAPH},
    {"dtype bits 0", "'float32', 'float32', 'float32', 'float32', 'float32', 'float32'",
     "'float32', 'float32', 'int0', 'float32', 'float32', 'float32'", MLF_ERR_GRAPH},
    {"dtype lanes 0", "'float32', 'float32', 'float32', 'float32', 'float32', 'float32'",
     "'float32', 'float32', 'int8x0', 'float32', 'float32', 'float32'", MLF_ERR_GRAPH},
    {"dtype as number", "'float32', 'float32', 'float32', 'float32', 'float32', 'float32'",
     "'float32', 'float32', 32, 'float32', 'float32', 'float32'", MLF_ERR_GRAPH},
    {"shape overflow", "[[1, 4], [1, 4], [1, 4], [4]",
     "[[1, 4], [65536, 65536, 65536], [1, 4], [4]", MLF_ERR_GRAPH},
    {"shape dim negative", "[[1, 4], [1, 4], [1, 4], [4]", "[[1, 4], [1, -4], [1, 4], [4]",
     MLF_ERR_GRAPH},
    {"shape not a list", "[[1, 4], [1, 4], [1, 4], [4]", "[[1, 4], 4, [1, 4], [4]", MLF_ERR_GRAPH},
    {"view larger than the arg pool", "[[1, 4], [1, 4], [1, 4], [4], [4], [4], [4], [1, 4]]",
     "[[1, 4], [1, 4], [1, 4], [4], [4], [4], [4], [1, 5]]", MLF_OK},
    {"input node out of range", "[[5, 1, 0]]", "[[50, 1, 0]]", MLF_ERR_GRAPH},
    {"input refers to a later node", "[[5, 1, 0]]", "[[6, 0, 0]]", MLF_ERR_GRAPH},
    {"input index out of range", "[[5, 1, 0]]", "[[5, 2, 0]]", MLF_ERR_GRAPH},
    {"input reference too short", "[[5, 1, 0]]", "[[5]]", MLF_ERR_GRAPH},
    {"arg node out of range", "'arg_nodes': [0, 1]", "'arg_nodes': [0, 100]", MLF_ERR_GRAPH},
    {"arg node is an operator", "'arg_nodes': [0, 1]", "'arg_nodes': [0, 2]", MLF_ERR_GRAPH},
    {"head out of range", "[[5, 0, 0], [6, 0, 0], [4, 0, 0]]", "[[5, 0, 0], [60, 0, 0]]",
     MLF_ERR_GRAPH},
    {"head index out of range", "[[5, 0, 0], [6, 0, 0], [4, 0, 0]]", "[[5, 2, 0]]", MLF_ERR_GRAPH},
    {"row ptr not rising", "[0, 1, 2, 3, 4, 5, 7, 8]", "[0, 1, 2, 3, 5, 4, 7, 8]", MLF_ERR_GRAPH},
    {"row ptr not from 0", "[0, 1, 2, 3, 4, 5, 7, 8]", "[1, 1, 2, 3, 4, 5, 7, 8]", MLF_ERR_GRAPH},
    {"row ptr huge", "[0, 1, 2, 3, 4, 5, 7, 8]", "[0, 1, 2, 3, 4, 5, 7, 4000000000]",
     MLF_ERR_GRAPH},
    {"row ptr empty", "[0, 1, 2, 3, 4, 5, 7, 8]", "[]", MLF_ERR_GRAPH},
    {"fewer nodes than rows", "[0, 1, 2, 3, 4, 5, 7, 8]", "[0, 1, 2, 3, 4, 5, 7, 8, 9]",
     MLF_ERR_GRAPH},
    {"more nodes than rows", "[0, 1, 2, 3, 4, 5, 7, 8]", "[0, 1, 2, 3, 4, 5, 7]", MLF_ERR_GRAPH},
    {"null node with two outputs", "[0, 1, 2, 3, 4, 5, 7, 8]", "[0, 2, 3, 4, 5, 6, 8, 9]",
     MLF_ERR_GRAPH},
    {"unknown op", "'op': 'null', 'name': 'p0'", "'op': 'mystery', 'name': 'p0'", MLF_ERR_GRAPH},
    {"op not a string", "'op': 'null', 'name': 'p0'", "'op': 7, 'name': 'p0'", MLF_ERR_GRAPH},
    {"no func_name", "'func_name': 'split'", "'fun_name': 'split'", MLF_ERR_GRAPH},
    {"func_name not a string", "'func_name': 'split'", "'func_name': ['split']", MLF_ERR_GRAPH},
    {"nop with two inputs",
     "'func_name': '__nop', 'hash': '5f15f01b6af28c29'}, 'inputs': "
     "[[2, 0, 0]]",
     "'func_name': '__nop', 'hash': '5f15f01b6af28c29'}, 'inputs': [[2, 0, 0],"
     " [1, 0, 0]]",
     MLF_ERR_GRAPH},
    {"copy of a different size", "[[1, 4], [1, 4], [1, 4], [4], [4]",
     "[[1, 4], [1, 4], [1, 4], [4], [5]", MLF_ERR_GRAPH},
    {"missing nodes", "'nodes'", "'nodez'", MLF_ERR_GRAPH},
    {"missing heads", "'heads'", "'headz'", MLF_ERR_GRAPH},
    {"missing shape", "'shape'", "'shapez'", MLF_ERR_GRAPH},
    {"attr without list", "'storage_id': ['list_int', [0, 1, 2, 2, 3, 4, 5, 2]]",
     "'storage_id': ['list_int']", MLF_ERR_GRAPH},
    {"device index 2", "'storage_id':",
     "'device_index': ['list_int', [1,1,2,1,1,1,1,1]], "
     "'storage_id':",
     MLF_ERR_UNSUPPORTED},
    {"device index short", "'storage_id':",
     "'device_index': ['list_int', [1,1]], "
     "'storage_id':",
     MLF_ERR_GRAPH},
    {"trailing garbage", "'node_row_ptr': [0, 1, 2, 3, 4, 5, 7, 8]\n}",
     "'node_row_ptr': [0, 1, 2, 3, 4, 5, 7, 8]\n} x", MLF_ERR_JSON},
    {"missing comma", "'arg_nodes': [0, 1]", "'arg_nodes': [0 1]", MLF_ERR_JSON},
    {"missing colon", "'arg_nodes': [0, 1]", "'arg_nodes' [0, 1]", MLF_ERR_JSON},
    {"unterminated string", "'arg_nodes'", "'arg_nodes", MLF_ERR_JSON},
    {"not an object", "{\n 'nodes'", "[\n 'nodes'", MLF_ERR_GRAPH},
    {"bad character", "'arg_nodes': [0, 1]", "'arg_nodes': [0, #]", MLF_ERR_JSON},
};

static char* mutate(const char* base, const mutation* m) {
  const char* at = strstr(base, m->from);
  if (at == NULL) return NULL;
  size_t head = (size_t)(at - base), from = strlen(m->from), to = strlen(m->to);
  char* text = (char*)malloc(strlen(base) - from + to + 1);
  memcpy(text, base, head);
  memcpy(text + head, m->to, to);
  strcpy(text + head + to, at + from);
  return text;
}

static void test_mutations(void) {
  for (size_t i = 0; i < sizeof(kMutations) / sizeof(kMutations[0]); ++i) {
    const mutation* m = &kMutations[i];
    char* base = json_from(kBasicJson);
    char* quoted = mutate(kBasicJson, m);
    if (quoted == NULL) {
      fprintf(stderr, "mutation '%s' does not apply\n", m->description);
      CHECK(quoted != NULL);
      free(base);
      continue;
    }
    char* json = json_from(quoted);
    void* mem;
    const mlf_graph* g;
    mlf_error err;
    mlf_status status = parse(json, strlen(json), &mem, &g, &err);
    if (status != m->expected) fprintf(stderr, "mutation: %s\n", m->description);
    CHECK_STATUS(status, m->expected, &err);
    free(mem);
    free(json);
    free(quoted);
    free(base);
  }
}

static void test_deep_nesting(void) {
  /* Inside skipped content any depth is fine (no recursion); where a list is expected it is
   * a type error. */
  size_t depth = 100000;
  char* base = json_from(kBasicJson);
  size_t len = strlen(base);
  char* json = (char*)malloc(len + 2 * depth + 32);
  size_t at = 0;
  at += (size_t)sprintf(json, "{'metadata': ");
  memset(json + at, '[', depth);
  at += depth;
  memset(json + at, ']', depth);
  at += depth;
  json[at++] = ',';
  memcpy(json + at, base + 1, len); /* the rest of the graph, after its '{' */
  char* text = json_from(json);
  void* mem;
  const mlf_graph* g;
  mlf_error err;
  CHECK_STATUS(parse(text, strlen(text), &mem, &g, &err), MLF_OK, &err);
  free(mem);
  free(text);

  at = (size_t)sprintf(json, "{'nodes': ");
  memset(json + at, '[', depth);
  json[at + depth] = '\0';
  text = json_from(json);
  CHECK(parse(text, strlen(text), &mem, &g, &err) != MLF_OK);
  free(mem);
  free(text);
  free(json);
  free(base);
}

static void test_error_details(void) {
  char* json = json_from(
      "{'nodes': [{'op': 'null', 'name': 'x', 'inputs': []}], 'arg_nodes': [0], 'heads': "
      "[[0,0,0]], 'attrs': {'dltype': ['list_str', ['complex64']], 'storage_id': ['list_int', "
      "[0]], 'shape': ['list_shape', [[3]]]}, 'node_row_ptr': [0,1]}");
  size_t bytes;
  mlf_error err;
  char message[200];
  CHECK_STATUS(mlf_graph_measure_json(json, strlen(json), &bytes, &err), MLF_ERR_GRAPH, &err);
  CHECK(err.subject != NULL && err.subject_len == 9 && memcmp(err.subject, "complex64", 9) == 0);
  CHECK(err.offset != UINT32_MAX && json[err.offset - 1] == '"');
  mlf_error_format(&err, message, sizeof(message));
  CHECK(strstr(message, "complex64") != NULL);
  free(json);

  /* A failing node is named. */
  json = json_from(kBasicJson);
  char* bad = strstr(json, "[[4, 0, 0]]");
  bad[4] = '9';
  CHECK_STATUS(mlf_graph_measure_json(json, strlen(json), &bytes, &err), MLF_ERR_GRAPH, &err);
  CHECK_EQ_INT(err.node, 5);
  free(json);
}

/* Numbers are JSON integers below 10^9: no leading zeros (so that shapes compare as text),
 * no fraction or exponent. */
static void test_number_rules(void) {
  static const struct {
    const char* storage; /* the storage_id list of a one-entry graph */
    mlf_status expected;
  } cases[] = {
      {"[0]", MLF_OK},          {"[00]", MLF_ERR_GRAPH},        {"[01]", MLF_ERR_GRAPH},
      {"[1e0]", MLF_ERR_GRAPH}, {"[999999999]", MLF_ERR_GRAPH}, {"[1000000000]", MLF_ERR_GRAPH},
      {"[-0]", MLF_ERR_GRAPH},  {"[0.0]", MLF_ERR_GRAPH},       {"[ 0 ]", MLF_OK},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    char text[512];
    snprintf(text, sizeof(text),
             "{'nodes': [{'op': 'null', 'name': 'x', 'inputs': []}], 'arg_nodes': [0], "
             "'heads': [[0,0,0]], 'attrs': {'dltype': ['list_str', ['int8']], 'storage_id': "
             "['list_int', %s], 'shape': ['list_shape', [[3]]]}, 'node_row_ptr': [0,1]}",
             cases[i].storage);
    char* json = json_from(text);
    void* mem;
    const mlf_graph* g;
    mlf_error err;
    mlf_status status = parse(json, strlen(json), &mem, &g, &err);
    if (status != cases[i].expected) fprintf(stderr, "storage_id %s\n", cases[i].storage);
    CHECK_STATUS(status, cases[i].expected, &err);
    free(mem);
    free(json);
  }
}

/* Views are shared by entries of equal storage, dtype and shape however the text is spaced;
 * a function called again after another one is counted again by the measure, not by the
 * tables. */
static void test_sharing(void) {
  char* json = json_from(
      "{'nodes': [{'op': 'null', 'name': 'x', 'inputs': []}, "
      "{'op': 'tvm_op', 'name': 'a', 'attrs': {'func_name': 'add'}, 'inputs': [[0,0,0],[0,0,0]]}, "
      "{'op': 'tvm_op', 'name': 's', 'attrs': {'func_name': 'scale2'}, 'inputs': [[1,0,0]]}, "
      "{'op': 'tvm_op', 'name': 'b', 'attrs': {'func_name': 'add'}, 'inputs': [[2,0,0],[0,0,0]]}], "
      "'arg_nodes': [0], 'heads': [[3,0,0]], 'attrs': {'dltype': ['list_str', ['float32', "
      "'float32', 'float32', 'float32']], 'storage_id': ['list_int', [0, 1, 2, 1]], 'shape': "
      "['list_shape', [[1,4], [1, 4], [ 1 ,4 ], [1,\n4]]]}, 'node_row_ptr': [0,1,2,3,4]}");
  void* mem;
  const mlf_graph* g;
  mlf_error err;
  size_t bytes;
  CHECK_STATUS(mlf_graph_measure_json(json, strlen(json), &bytes, &err), MLF_OK, &err);
  CHECK_STATUS(parse(json, strlen(json), &mem, &g, &err), MLF_OK, &err);
  if (g != NULL) {
    CHECK_EQ_INT(g->num_views, 3); /* storage 1 seen twice with the same shape */
    CHECK_EQ_INT(g->num_funcs, 2);
    CHECK_EQ_INT(g->ops[2].func, g->ops[0].func);
    /* add, scale2, add: three names measured, two kept */
    CHECK_EQ_INT(bytes, MLF_ALIGN_UP(sizeof(mlf_graph), 8) + MLF_ALIGN_UP(3 * sizeof(mlf_op), 8) +
                            MLF_ALIGN_UP(8 * 2, 8) + MLF_ALIGN_UP(3 * sizeof(mlf_name), 8) +
                            MLF_ALIGN_UP(3 * sizeof(mlf_view), 8) + 6 * 8 + MLF_ALIGN_UP(3 * 4, 8) +
                            MLF_ALIGN_UP(sizeof(mlf_arg), 8) + 8 + MLF_ALIGN_UP(4 * 4, 8));
  }
  free(mem);
  free(json);
}

/* The description of a failure comes from the runtime's catalogue. */
static void test_error_text(void) {
  char* json = json_from(
      "{'nodes': 3, 'arg_nodes': [], 'heads': [], 'node_row_ptr': [0], 'attrs': {'shape': "
      "['list_shape', []], 'dltype': ['list_str', []], 'storage_id': ['list_int', []]}}");
  size_t bytes;
  mlf_error err;
  CHECK_STATUS(mlf_graph_measure_json(json, strlen(json), &bytes, &err), MLF_ERR_GRAPH, &err);
  CHECK(err.what != NULL && strcmp(err.what, "expected [ or {") == 0);
  CHECK_EQ_INT(err.offset, 10);
  free(json);
  json = json_from("{'nodes': [], 'arg_nodes': [], 'heads': [], 'node_row_ptr': [0]}");
  CHECK_STATUS(mlf_graph_measure_json(json, strlen(json), &bytes, &err), MLF_ERR_GRAPH, &err);
  CHECK(err.what != NULL && strcmp(err.what, "missing section") == 0);
  CHECK(err.subject_len == 5 && memcmp(err.subject, "shape", 5) == 0);
  free(json);
}

int main(void) {
  RUN(test_basic_tables);
  RUN(test_shuffled_keys_and_unknowns);
  RUN(test_measure_is_exact_for_chain);
  RUN(test_long_names);
  RUN(test_scalar_and_flatten);
  RUN(test_nop_between_storages_becomes_copy);
  RUN(test_dtypes);
  RUN(test_memory_rules);
  RUN(test_truncated_everywhere);
  RUN(test_mutations);
  RUN(test_deep_nesting);
  RUN(test_error_details);
  RUN(test_number_rules);
  RUN(test_sharing);
  RUN(test_error_text);
  return test_finish();
}
