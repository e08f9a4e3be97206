/*
 * test_graphs.c — see test_graphs.h.
 */
#include "test_graphs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

char* json_from(const char* single_quoted) {
  size_t n = strlen(single_quoted);
  char* text = (char*)malloc(n + 1);
  for (size_t i = 0; i <= n; ++i) text[i] = single_quoted[i] == '\'' ? '"' : single_quoted[i];
  return text;
}

#define OP(name, func, n_in, n_out, inputs)                                \
  "{'op': 'tvm_op', 'name': '" name "', 'attrs': {'num_outputs': '" #n_out \
  "', 'num_inputs': '" #n_in "', 'flatten_data': '0', 'func_name': '" func \
  "', "                                                                    \
  "'hash': '5f15f01b6af28c29'}, 'inputs': " inputs "}"
#define NULL_NODE(name) "{'op': 'null', 'name': '" name "', 'inputs': []}"

const char* const kBasicJson =
    "{\n 'nodes': [" NULL_NODE("x") ", " NULL_NODE("p0") ",\n  " OP(
        "fused_add", "add", 2, 1, "[[0, 0, 0], [1, 0, 0]]") ",\n  " OP("reshape_nop", "__nop", 1,
                                                                        1,
                                                                        "[[2, 0, 0]]") ",\n  "
    OP("copy", "__copy", 1, 1, "[[3, 0, 0]]") ",\n  " OP("fused_split", "split", 1, 2,
                                                          "[[4, 0, 0]]") ",\n  "
    OP("fused_scale2", "scale2", 1, 1, "[[5, 1, 0]]") "],\n"
    " 'arg_nodes': [0, 1],\n"
    " 'heads': [[5, 0, 0], [6, 0, 0], [4, 0, 0]],\n"
    " 'attrs': {\n"
    "  'dltype': ['list_str', ['float32', 'float32', 'float32', 'float32', 'float32', "
    "'float32', 'float32', 'float32']],\n"
    "  'storage_id': ['list_int', [0, 1, 2, 2, 3, 4, 5, 2]],\n"
    "  'shape': ['list_shape', [[1, 4], [1, 4], [1, 4], [4], [4], [4], [4], [1, 4]]]},\n"
    " 'node_row_ptr': [0, 1, 2, 3, 4, 5, 7, 8]\n}\n";

const char* const kBasicShuffledJson =
    "{'node_row_ptr': [0,1,2,3,4,5,7,8], 'metadata': {'signature': [[[{'deep': [1.5e3, true, "
    "null, 'x\\\\\\u00e9']}]]]}, 'attrs': {"
    "'storage_scope': ['list_str', ['global', 'global', 'global', 'global', 'global', "
    "'global', 'global', 'global']], "
    "'shape': ['list_shape', [[1,4],[1,4],[1,4],[4],[4],[4],[4],[1,4]]], "
    "'device_index': ['list_int', [1,1,1,1,1,1,1,1]], "
    "'storage_id': ['list_int', [0,1,2,2,3,4,5,2]], 'future': {'a': [1, {}]}, "
    "'dltype': ['list_str', ['float32','float32','float32','float32','float32','float32',"
    "'float32','float32']]}, "
    "'heads': [[5,0,0],[6,0],[4,0,0]], 'arg_nodes': [0,1], 'nodes': ["
    "{'inputs': [], 'name': 'x', 'op': 'null', 'extra': 'ignored'}, "
    "{'name': 'p0', 'inputs': [], 'op': 'null'}, "
    "{'inputs': [[0,0,0],[1,0]], 'attrs': {'weight_layout': '', 'func_name': 'add', "
    "'out_layout': 'NC8n', 'unknown_attr': {'nested': [1,2,3]}}, 'op': 'tvm_op', 'name': 'a'}, "
    "{'attrs': {'func_name': '__nop'}, 'inputs': [[2,0,0]], 'op': 'tvm_op', 'name': 'n'}, "
    "{'op': 'tvm_op', 'attrs': {'func_name': '__copy', 'num_inputs': '1'}, 'inputs': "
    "[[3,0,0]], 'name': 'c'}, "
    "{'name': 's', 'op': 'tvm_op', 'inputs': [[4,0,0]], 'attrs': {'num_outputs': '2', "
    "'func_name': 'split'}}, "
    "{'op': 'tvm_op', 'inputs': [[5,1,0]], 'attrs': {'flatten_data': '0', 'func_name': "
    "'scale2', 'hash': ''}, 'name': 'sc'}]}";

static const int64_t kBasicShapes[] = {1, 4, 4};
static const mlf_view kBasicViews[] = {
    {0, 0, 2, 0, {kDLFloat, 32, 1}}, {0, 1, 2, 0, {kDLFloat, 32, 1}},
    {0, 2, 2, 0, {kDLFloat, 32, 1}}, {2, 2, 1, 0, {kDLFloat, 32, 1}},
    {2, 3, 1, 0, {kDLFloat, 32, 1}}, {2, 4, 1, 0, {kDLFloat, 32, 1}},
    {2, 5, 1, 0, {kDLFloat, 32, 1}},
};
static const mlf_op kBasicOps[] = {
    {0, 3, 1, 0, 0, 2},
    {MLF_FUNC_COPY, 2, 1, 0, 3, 4},
    {1, 3, 2, 0, 5, 5},
    {2, 2, 1, 0, 8, 6},
};
static const uint16_t kBasicOpArgs[] = {0, 1, 2, 3, 4, 4, 5, 6, 6, 2};
static const mlf_name kBasicFuncs[] = {{"add", 3}, {"split", 5}, {"scale2", 6}};
static const uint32_t kBasicStorage[] = {16, 16, 16, 16, 16, 16};
static const mlf_arg kBasicArgs[] = {{{"x", 1}, 0, 0}, {{"p0", 2}, 1, 1}};
static const uint32_t kBasicOutputs[] = {5, 2, 4};

const mlf_graph kBasicTables = {
    .num_nodes = 7,
    .num_ops = 4,
    .ops = kBasicOps,
    .num_op_args = 10,
    .op_args = kBasicOpArgs,
    .max_op_args = 3,
    .num_funcs = 3,
    .funcs = kBasicFuncs,
    .num_views = 7,
    .views = kBasicViews,
    .num_shape_dims = 3,
    .shapes = kBasicShapes,
    .num_storage = 6,
    .storage_bytes = kBasicStorage,
    .num_args = 2,
    .args = kBasicArgs,
    .num_outputs = 3,
    .outputs = kBasicOutputs,
};

const char* const kWideJson =
    "{'nodes': [" NULL_NODE("i0") "," NULL_NODE("i1") "," NULL_NODE("i2") "," NULL_NODE(
        "i3") "," NULL_NODE("i4") "," NULL_NODE("i5") "," NULL_NODE("i6") "," NULL_NODE("i7") ","
        NULL_NODE("i8") "," NULL_NODE("i9") "," NULL_NODE("i10") "," OP(
            "sum", "sum11", 11, 1,
            "[[0,0,0],[1,0,0],[2,0,0],[3,0,0],[4,0,0],[5,0,0],[6,0,0],[7,0,0],[8,0,0],[9,0,0],"
            "[10,0,0]]") "],"
    "'arg_nodes': [0,1,2,3,4,5,6,7,8,9,10], 'heads': [[11,0,0]],"
    "'attrs': {'dltype': ['list_str', ['float32','float32','float32','float32','float32',"
    "'float32','float32','float32','float32','float32','float32','float32']],"
    "'storage_id': ['list_int', [0,1,2,3,4,5,6,7,8,9,10,11]],"
    "'shape': ['list_shape', [[2],[2],[2],[2],[2],[2],[2],[2],[2],[2],[2],[2]]]},"
    "'node_row_ptr': [0,1,2,3,4,5,6,7,8,9,10,11,12]}";

const char* const kScalarJson =
    "{'nodes': [" NULL_NODE("s") "," OP("sc", "scalar3", 1, 1, "[[0,0,0]]") "],"
    "'arg_nodes': [0], 'heads': [[1,0,0]], 'attrs': {'dltype': ['list_str', ['float32',"
    "'float32']], 'storage_id': ['list_int', [0,1]], 'shape': ['list_shape', [[],[]]]},"
    "'node_row_ptr': [0,1,2]}";

const char* const kWorkspaceJson =
    "{'nodes': [" NULL_NODE("x") "," OP("ws", "workspace", 1, 1, "[[0,0,0]]") "],"
    "'arg_nodes': [0], 'heads': [[1,0,0]], 'attrs': {'dltype': ['list_str', ['float32',"
    "'float32']], 'storage_id': ['list_int', [0,1]], 'shape': ['list_shape', [[16],[16]]]},"
    "'node_row_ptr': [0,1,2]}";

const char* const kFailJson =
    "{'nodes': [" NULL_NODE("x") "," OP("a", "add", 2, 1, "[[0,0,0],[0,0,0]]") "," OP(
        "f", "fail", 1, 1, "[[1,0,0]]") "],"
    "'arg_nodes': [0], 'heads': [[2,0,0]], 'attrs': {'dltype': ['list_str', ['float32',"
    "'float32','float32']], 'storage_id': ['list_int', [0,1,2]], 'shape': ['list_shape', "
    "[[4],[4],[4]]]}, 'node_row_ptr': [0,1,2,3]}";

const char* const kFlattenJson =
    "{'nodes': [" NULL_NODE("x") ",{'op': 'tvm_op', 'name': 'f', 'attrs': {'func_name': "
    "'scale2', 'flatten_data': '1'}, 'inputs': [[0,0,0]]}],"
    "'arg_nodes': [0], 'heads': [[1,0,0]], 'attrs': {'dltype': ['list_str', ['float32',"
    "'float32']], 'storage_id': ['list_int', [0,1]], 'shape': ['list_shape', "
    "[[2,2],[2,2]]]}, 'node_row_ptr': [0,1,2]}";

char* long_names_json(const char** param_name) {
  static char name[201];
  memset(name, 'w', 200);
  memcpy(name, "a_very_long_parameter_name_", 27);
  name[200] = '\0';
  *param_name = name;
  char* text = (char*)malloc(4096);
  snprintf(text, 4096,
           "{'nodes': [" NULL_NODE("x") ", " NULL_NODE("%s") ", " OP(
               "long", LONG_FUNC_NAME, 1, 1, "[[1,0,0]]") ", " OP("a", "add", 2, 1,
                                                                   "[[0,0,0],[2,0,0]]") "],"
           "'arg_nodes': [0, 1], 'heads': [[3,0,0]], 'attrs': {'dltype': ['list_str', "
           "['float32','float32','float32','float32']], 'storage_id': ['list_int', [0,1,2,3]],"
           "'shape': ['list_shape', [[4],[4],[4],[4]]]}, 'node_row_ptr': [0,1,2,3,4]}",
           name);
  char* json = json_from(text);
  free(text);
  return json;
}

char* chain_json(int n) {
  size_t size = 512 + (size_t)n * 300;
  char* text = (char*)malloc(size);
  size_t at = 0;
  at += (size_t)snprintf(text + at, size - at,
                         "{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", \"inputs\": []}");
  for (int i = 1; i <= n; ++i) {
    at += (size_t)snprintf(text + at, size - at,
                           ", {\"op\": \"tvm_op\", \"name\": \"tvmgen_default_fused_add\", "
                           "\"attrs\": {\"num_outputs\": \"1\", \"num_inputs\": \"2\", "
                           "\"flatten_data\": \"0\", \"func_name\": \"tvmgen_default_fused_add\","
                           " \"hash\": \"8d1a3b0f6f1e9a2c\"}, \"inputs\": [[%d, 0, 0], [0, 0, 0]]}",
                           i - 1);
  }
  at += (size_t)snprintf(text + at, size - at,
                         "], \"arg_nodes\": [0], \"heads\": [[%d, 0, 0]], \"attrs\": {"
                         "\"dltype\": [\"list_str\", [",
                         n);
  for (int i = 0; i <= n; ++i) {
    at += (size_t)snprintf(text + at, size - at, "%s\"float32\"", i ? ", " : "");
  }
  at += (size_t)snprintf(text + at, size - at, "]], \"storage_id\": [\"list_int\", [");
  for (int i = 0; i <= n; ++i) {
    at += (size_t)snprintf(text + at, size - at, "%s%d", i ? ", " : "", i == 0 ? 0 : 1 + i % 2);
  }
  at += (size_t)snprintf(text + at, size - at, "]], \"shape\": [\"list_shape\", [");
  for (int i = 0; i <= n; ++i) {
    at += (size_t)snprintf(text + at, size - at, "%s[1, 256]", i ? ", " : "");
  }
  at += (size_t)snprintf(text + at, size - at, "]]}, \"node_row_ptr\": [");
  for (int i = 0; i <= n + 1; ++i) {
    at += (size_t)snprintf(text + at, size - at, "%s%d", i ? ", " : "", i);
  }
  snprintf(text + at, size - at, "]}");
  return text;
}
