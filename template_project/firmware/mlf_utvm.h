/*
 * mlf_utvm.h — TVM 0.14's microTVM RPC server (host-driven flow), our own implementation,
 * so that `tvm.micro.Session` and everything built on it (create_local_graph_executor,
 * AotModule, time_evaluator, AutoTVM) drive a firmware built from this template.
 *
 * Layers, one source file each (wire facts: ../shared/spec/microtvm-rpc.md, summarised in
 * docs/protocol.md):
 *
 *   mlf_utvm_framing.c  FF FD packets: escapes, u32 length, CRC-16/CCITT-FALSE over the
 *                       escaped bytes. A damaged packet is dropped whole (TVM's own device
 *                       misreads the next one) and the receiver hunts for the next start.
 *   mlf_utvm_session.c  3-byte session header: StartSessionInit/Reply with nonces, Terminate
 *                       at boot, Log, Normal. A message of a stale session is dropped and
 *                       nothing is left behind (TVM's device wedges).
 *   mlf_utvm_minrpc.c   MinRPC: argument sequences, CallFunc, copies, syscalls, replies. A
 *                       malformed request gets an Exception (never a crash or a spin).
 *   mlf_utvm_globals.c  what the host calls: runtime.SystemLib, ModuleGetFunction, the
 *                       packet size, RPCTimeEvaluator, random_fill, the AOT executor module.
 *   mlf_utvm_graph.c    tvm.graph_executor.create: a graph executor over a graph JSON the host
 *                       sends, in device memory, driven through TVM's GraphModule functions;
 *                       or mlf_utvm_graph_none.c, which refuses it (the project option
 *                       device_graph_executor chooses: off by default, since it costs a
 *                       receive buffer as large as the graph JSON and the executor's memory).
 *   mlf_utvm_alloc.c    device memory the host allocates (DevAllocData...): a fixed arena,
 *                       every block known, so every pointer the host sends is checked.
 *
 * All state is in one mlf_utvm that the caller owns (no globals); memory is the caller's
 * (receive buffer, arena). Bytes out go through mlf_utvm_config.write (default: the
 * platform's console link).
 */
#ifndef MLF_UTVM_H_
#define MLF_UTVM_H_

#include <stddef.h>
#include <stdint.h>

#include "mlf_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest payload TVM's host accepts from a device (its receive buffer): bigger replies
 * would be lost silently, so none is ever sent. */
#define MLF_UTVM_HOST_MAX_PAYLOAD 2048u
/* Session header (3) + MinRPC length field (8): what GetCRTMaxPacketSize leaves out. */
#define MLF_UTVM_PACKET_OVERHEAD 11u

#ifndef MLF_UTVM_MAX_ARGS
#define MLF_UTVM_MAX_ARGS 32u /* values in one argument sequence */
#endif
#ifndef MLF_UTVM_MAX_DIMS
#define MLF_UTVM_MAX_DIMS 128u /* shape dimensions of all tensors of one request */
#endif
#ifndef MLF_UTVM_MAX_BLOCKS
#define MLF_UTVM_MAX_BLOCKS 128u /* live device allocations */
#endif
#ifndef MLF_UTVM_MAX_FUNCS
#define MLF_UTVM_MAX_FUNCS 64u /* distinct library functions handed to the host at once */
#endif
#ifndef MLF_UTVM_MAX_REPEAT
#define MLF_UTVM_MAX_REPEAT 64u /* time evaluator repeats (8 bytes each in the reply) */
#endif
#ifndef MLF_UTVM_MAX_TIMED_CALLS
#define MLF_UTVM_MAX_TIMED_CALLS 100000000u /* cap on a time evaluator's `number` */
#endif
#ifndef MLF_UTVM_MAX_GRAPHS
#define MLF_UTVM_MAX_GRAPHS 2u /* graph executors the host created and has not freed */
#endif
#define MLF_UTVM_TX_STAGING 64u
#define MLF_UTVM_REPLY_HEAD 160u

/* What a library function takes, known from the model's graph: generated code checks
 * nothing (not the count, not the types, not the shapes), so a call the host gets wrong
 * would write anywhere. With a signature, a call must pass num_args tensors, tensor i at least
 * bytes[first + i] long. */
typedef struct {
  uint16_t num_args;
  uint16_t first;
} mlf_utvm_signature;

/* A model of the firmware as the RPC server sees it. */
typedef struct {
  const char* name;         /* NUL-terminated */
  const TVMModule* library; /* its system library (functions by name), or NULL */
  const TVMModule* extra;   /* functions TVM left out of that registry (CMSIS-NN's), or NULL */
  mlf_executor* executor;   /* an initialised executor (AOT models: the AOT executor module
                               serves it), or NULL */
  mlf_workspace* workspace; /* bound while its executor runs, or NULL */
  /* Optional signatures: function sig_funcs[i] takes signatures[i] (graph models). */
  const TVMBackendPackedCFunc* sig_funcs;
  const mlf_utvm_signature* signatures;
  const uint32_t* sig_bytes;
  uint32_t num_signatures;
} mlf_utvm_model;

typedef void (*mlf_utvm_write_fn)(void* context, const uint8_t* data, size_t n);

typedef struct {
  const mlf_utvm_model* models;
  uint32_t num_models;
  uint8_t* rx_buffer; /* receive buffer: rx_size + 1 bytes (a NUL after the last string) */
  size_t rx_size;     /* largest packet payload accepted, at least 64 */
  uint8_t* arena;     /* device memory the host allocates from */
  size_t arena_size;
  mlf_workspace* workspace; /* bound around calls of library functions, or NULL */
  mlf_utvm_write_fn write;  /* NULL: mlf_platform_write */
  void* write_context;
  uint32_t seed; /* mixed into the nonce generator (with the tick counter) */
} mlf_utvm_config;

/* ---- private state, declared so the caller can own it -------------------------------- */

typedef struct {
  uint32_t offset; /* from the arena's aligned start */
  uint32_t size;
} mlf_utvm_block;

typedef struct {
  TVMBackendPackedCFunc fn;
  const uint32_t* arg_bytes; /* with a signature: least bytes of every argument */
  uint16_t refs;
  uint16_t num_args; /* with a signature; else UINT16_MAX */
} mlf_utvm_func;

typedef struct {
  TVMValue values[MLF_UTVM_MAX_ARGS];
  int codes[MLF_UTVM_MAX_ARGS];
  uint32_t lens[MLF_UTVM_MAX_ARGS]; /* strings and bytes */
  DLTensor tensors[MLF_UTVM_MAX_ARGS];
  int64_t dims[MLF_UTVM_MAX_DIMS];
  uint32_t num;
  uint32_t num_dims;
} mlf_utvm_args;

typedef struct {
  uint64_t target; /* function handle it times */
  uint32_t number, repeat, min_repeat_ms, limit_zero;
  uint32_t generation;
} mlf_utvm_timer;

/* A graph executor the host created: two blocks of device memory the host cannot reach (but
 * for the executor's inputs and outputs), `tables` (the JSON's copy and the parsed tables) and
 * `state` (executor, function pointers, state, arena). generation 0: a free slot. */
typedef struct {
  uint8_t* tables;
  uint8_t* state;
  uint16_t generation;
} mlf_utvm_graph;

typedef struct mlf_utvm {
  mlf_utvm_config config;
  /* framing, receive side */
  uint8_t rx_state, rx_escaped, rx_discard, rx_field_got;
  uint16_t rx_crc, rx_packet_crc;
  uint32_t rx_len, rx_got;
  /* framing, send side */
  uint8_t tx[MLF_UTVM_TX_STAGING];
  size_t tx_fill;
  uint16_t tx_crc;
  /* session */
  uint8_t established, host_nonce, device_nonce;
  uint32_t rng;
  /* MinRPC */
  mlf_utvm_args args;
  uint8_t reply[MLF_UTVM_REPLY_HEAD];
  size_t reply_len;
  /* objects handed to the host */
  uint8_t* arena_base;
  size_t arena_size;
  mlf_utvm_block blocks[MLF_UTVM_MAX_BLOCKS];
  uint32_t num_blocks;
  mlf_utvm_func funcs[MLF_UTVM_MAX_FUNCS];
  mlf_utvm_timer timer;
  double results[MLF_UTVM_MAX_REPEAT];
  mlf_utvm_graph graphs[MLF_UTVM_MAX_GRAPHS];
  uint16_t graph_serial; /* the last generation given out: a freed executor's handles die */
  int shutdown;
} mlf_utvm;

/* ---- the server ------------------------------------------------------------------------ */

/* Takes the configuration (0) or refuses it (-1: no receive buffer, rx_size below 64). */
int mlf_utvm_init(mlf_utvm* ut, const mlf_utvm_config* config);

/* What a device sends when it boots: a lone FE and a TerminateSession. */
void mlf_utvm_announce(mlf_utvm* ut);

/* Takes received bytes; answers every complete request among them. Returns 1 once the host
 * sent Shutdown, else 0. */
int mlf_utvm_feed(mlf_utvm* ut, const uint8_t* data, size_t n);

/* init + announce + read from the platform until Shutdown (returns 0) or link loss (0). */
int mlf_utvm_serve(mlf_utvm* ut, const mlf_utvm_config* config);

/* A Log message (shown by the host as "remote: <text>"): 1..1023 bytes, else nothing. */
void mlf_utvm_log(mlf_utvm* ut, const char* text, size_t n);

/* ---- between the layers (not for callers) ------------------------------------------ */

uint16_t mlf_utvm_crc16(uint16_t crc, const uint8_t* data, size_t n);
/* Streams one packet: begin with the unescaped payload length, bytes, end. */
void mlf_utvm_tx_begin(mlf_utvm* ut, uint32_t payload_len);
void mlf_utvm_tx_bytes(mlf_utvm* ut, const uint8_t* data, size_t n);
void mlf_utvm_tx_end(mlf_utvm* ut);
void mlf_utvm_tx_noop(mlf_utvm* ut);

/* Session: a whole packet received; a Normal reply sent (header bytes + tail). */
void mlf_utvm_session_packet(mlf_utvm* ut, uint8_t* payload, uint32_t len);
/* A good packet longer than the receive buffer, whose first rx_size bytes are at head. */
void mlf_utvm_session_oversized(mlf_utvm* ut, const uint8_t* head);
void mlf_utvm_session_send(mlf_utvm* ut, const uint8_t* head, size_t head_len, const uint8_t* tail,
                           size_t tail_len);
uint32_t mlf_utvm_random(mlf_utvm* ut);

/* MinRPC: one request (the Normal message's body). */
void mlf_utvm_minrpc_request(mlf_utvm* ut, uint8_t* body, uint32_t len);

/* Replies (mlf_utvm_minrpc.c). A CallFunc result is two values, the result's own type code
 * as an int and the value (docs/protocol.md): */
void mlf_utvm_return(mlf_utvm* ut, int type_code, int wire_code, uint64_t bits);
/* A string (11) or bytes (12) result; -1 (nothing sent) when it would not fit the host's
 * buffer, so the caller can send an Exception instead. */
int mlf_utvm_return_blob(mlf_utvm* ut, int type_code, const void* data, size_t len);
/* An NDArray result: the tensor and a handle the host frees later. */
void mlf_utvm_return_array(mlf_utvm* ut, const DLTensor* t, uint64_t handle);
void mlf_utvm_exception(mlf_utvm* ut, const char* message);

/* Globals (mlf_utvm_globals.c): handles are u64 on the wire with a kind in bits 32..39. */
#define MLF_UTVM_HANDLE(kind, low) (((uint64_t)(kind) << 32) | (uint32_t)(low))
#define MLF_UTVM_KIND(handle) ((uint32_t)((handle) >> 32))
#define MLF_UTVM_LOW(handle) ((uint32_t)(handle))
enum {
  MLF_UTVM_GLOBAL = 1,      /* a global function, low = its index */
  MLF_UTVM_MODULE = 2,      /* low 0: the system library (all models); 1 + m: AOT executor of m */
  MLF_UTVM_LIBFUNC = 3,     /* a library function, low = slot in mlf_utvm.funcs */
  MLF_UTVM_TIMER = 4,       /* the time evaluator, low = generation */
  MLF_UTVM_METHOD = 5,      /* an AOT executor method, low = model << 8 | method */
  MLF_UTVM_ARRAY = 6,       /* an executor's input/output array (freeing it does nothing) */
  MLF_UTVM_GRAPH = 7,       /* a graph executor, low = generation << 16 | slot << 8 */
  MLF_UTVM_GRAPH_METHOD = 8 /* its function, low = generation << 16 | slot << 8 | method */
};
uint64_t mlf_utvm_global_lookup(const char* name, size_t len);
/* The functions both executor modules (AOT, graph) have, in the order TVM's wrappers look
 * them up; a module's own follow from MLF_UTVM_COMMON_METHODS on. */
enum {
  MLF_UTVM_SET_INPUT,
  MLF_UTVM_RUN,
  MLF_UTVM_GET_OUTPUT,
  MLF_UTVM_GET_INPUT,
  MLF_UTVM_GET_NUM_OUTPUTS,
  MLF_UTVM_GET_INPUT_INDEX,
  MLF_UTVM_GET_NUM_INPUTS,
  MLF_UTVM_COMMON_METHODS
};
/* A method's index: a common one's, else MLF_UTVM_COMMON_METHODS + its index in `own`;
 * MLF_UTVM_COMMON_METHODS + num_own when there is none. */
uint32_t mlf_utvm_method(const char* name, size_t len, const char* const* own, uint32_t num_own);
/* Calls function handle `fn` with ut->args; sends the reply (Return or Exception). */
void mlf_utvm_call(mlf_utvm* ut, uint64_t fn);
/* 0, or -1 for a handle that is no longer live (a graph executor freed twice). */
int mlf_utvm_free_handle(mlf_utvm* ut, uint64_t handle, int64_t kind);
/* The model whose library (or extra) has function `name`, which goes to *fn; NULL if none. */
const mlf_utvm_model* mlf_utvm_find_function(const mlf_utvm* ut, const char* name, size_t len,
                                             TVMBackendPackedCFunc* fn);
/* The signature model gives fn, or NULL. */
const mlf_utvm_signature* mlf_utvm_signature_of(const mlf_utvm_model* model,
                                                TVMBackendPackedCFunc fn);
/* Binds the workspace library functions draw from (ws, else the configuration's). */
void mlf_utvm_bind_workspace(mlf_utvm* ut, mlf_workspace* ws);
void mlf_utvm_int_result(mlf_utvm* ut, int64_t v);
/* The input a call's one argument names (an index, or a name string); UINT32_MAX if none. */
uint32_t mlf_utvm_input_of(mlf_utvm* ut, mlf_executor* ex);
/* An executor's input or output as an NDArray result (handle MLF_UTVM_ARRAY, low). */
void mlf_utvm_array_result(mlf_utvm* ut, uint32_t low, const mlf_tensor_info* info, void* data);

/* Graph executors (mlf_utvm_graph.c): the global's call (ut->args), a function of a graph
 * executor's module (0 when it has none of that name), a call of one, the handle's free
 * (-1 when it is not live), one run for the time evaluator (0 ok). */
void mlf_utvm_graph_create(mlf_utvm* ut);
uint64_t mlf_utvm_graph_function(mlf_utvm* ut, uint64_t module, const char* name, size_t len);
void mlf_utvm_graph_call(mlf_utvm* ut, uint64_t fn);
int mlf_utvm_graph_free(mlf_utvm* ut, uint64_t module);
int mlf_utvm_graph_run(mlf_utvm* ut, uint64_t fn);
/* Whether the block at `block` is a live graph executor's (the host may not touch it); the
 * live graph executor whose input or output holds [address, address + nbytes) (1), or none. */
int mlf_utvm_graph_owns(const mlf_utvm* ut, const uint8_t* block);
int mlf_utvm_graph_io_ok(const mlf_utvm* ut, uint64_t address, uint64_t nbytes);
/* Whether [address, address + nbytes) lies inside one of ex's inputs or outputs. */
int mlf_utvm_executor_io_ok(mlf_executor* ex, uint64_t address, uint64_t nbytes);

/* Memory (mlf_utvm_alloc.c). */
void mlf_utvm_alloc_init(mlf_utvm* ut, uint8_t* arena, size_t size);
void* mlf_utvm_alloc(mlf_utvm* ut, uint64_t nbytes, uint64_t alignment);
int mlf_utvm_free(mlf_utvm* ut, uint64_t address);
/* Whether [address, address + nbytes) lies inside one allocation or one of an executor's
 * inputs or outputs: the only memory the host may read, write or hand to a function. */
int mlf_utvm_memory_ok(const mlf_utvm* ut, uint64_t address, uint64_t nbytes);
/* Bytes of a tensor (prod(shape) * ceil(bits * lanes / 8)); UINT64_MAX when absurd. */
uint64_t mlf_utvm_tensor_bytes(const DLTensor* t);
/* Checks a tensor the host sent: its data (with byte_offset) inside memory the host may use;
 * folds byte_offset into data (TVM's C operators ignore it). 0 ok, -1 not. */
int mlf_utvm_tensor_ok(const mlf_utvm* ut, DLTensor* t);

#ifdef __cplusplus
}
#endif

#endif /* MLF_UTVM_H_ */
