/*
 * real_runtime_main.c — a host_driven firmware over the real runtime (crt/src) and the host
 * platform (crt/platform/host) with the hand-written model of tiny_model.c: the device
 * loop end to end, as a generated project wires it.
 */
#include <string.h>

#include "mlf_device.h"
#include "mlf_platform.h"
#include "mlf_runtime.h"

extern const char tiny_model_graph_json[];

static uint8_t rx_buffer[MLF_FRAME_BUFFER_BYTES(4096)];
static uint64_t graph_tables[4096];
static uint64_t state[1024];
static uint8_t arena[4096] __attribute__((aligned(64)));
static uint8_t workspace_memory[1024] __attribute__((aligned(64)));

int main(void) {
  static mlf_executor executor;
  static mlf_workspace workspace;
  mlf_platform_init();
  const mlf_graph* graph = NULL;
  mlf_error err;
  mlf_status status = mlf_graph_parse_json(tiny_model_graph_json, strlen(tiny_model_graph_json),
                                           graph_tables, sizeof(graph_tables), &graph, &err);
  if (status == MLF_OK) {
    status = mlf_executor_init(&executor, graph, TVMSystemLibEntryPoint(), NULL, 0, state,
                               sizeof(state), arena, sizeof(arena));
  }
  if (status == MLF_OK)
    status = mlf_workspace_init(&workspace, workspace_memory, sizeof(workspace_memory));
  const mlf_device_model models[] = {{"tiny", &executor, &workspace, status, 0}};
  const mlf_device_config config = {models, 1,  "host", "host_driven", rx_buffer, sizeof(rx_buffer),
                                    4096,   200};
  mlf_platform_exit(mlf_device_serve(&config));
}
