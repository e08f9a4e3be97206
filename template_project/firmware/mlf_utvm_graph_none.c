/*
 * mlf_utvm_graph_none.c — tvm.graph_executor.create in firmware built without a graph executor
 * on the device (the default, see mlf_utvm.h): the host runs a graph itself
 * (tvm.micro.create_local_graph_executor), so the receive buffer holds a copy block, not a
 * graph JSON, and no device memory is set aside for an executor. The global says why it is
 * refused; no graph executor handle ever exists, so nothing else here is reached.
 */
#include "mlf_utvm.h"

void mlf_utvm_graph_create(mlf_utvm* ut) {
  mlf_utvm_exception(ut,
                     "tvm.graph_executor.create: this firmware has no graph executor on the "
                     "device (generate it with device_graph_executor=true), or run the graph "
                     "from the host with tvm.micro.create_local_graph_executor");
}

uint64_t mlf_utvm_graph_function(mlf_utvm* ut, uint64_t module, const char* name, size_t len) {
  (void)ut, (void)module, (void)name, (void)len;
  return 0;
}

void mlf_utvm_graph_call(mlf_utvm* ut, uint64_t fn) {
  (void)fn;
  mlf_utvm_exception(ut, "no graph executor on this device");
}

int mlf_utvm_graph_free(mlf_utvm* ut, uint64_t module) {
  (void)ut, (void)module;
  return -1;
}

int mlf_utvm_graph_run(mlf_utvm* ut, uint64_t fn) {
  (void)ut, (void)fn;
  return -1;
}

int mlf_utvm_graph_owns(const mlf_utvm* ut, const uint8_t* block) {
  (void)ut, (void)block;
  return 0;
}

int mlf_utvm_graph_io_ok(const mlf_utvm* ut, uint64_t address, uint64_t nbytes) {
  (void)ut, (void)address, (void)nbytes;
  return 0;
}
