/*
 * mlf_profile.h — per-call timing of the model's own functions, for `mlf-project profile`
 * (project option `profile`; docs/protocol.md, PROFILE).
 *
 * The model's generated C is compiled with -finstrument-functions, so GCC calls
 * __cyg_profile_func_enter/exit around each of its functions; the model's C itself stays
 * untouched. Every call up to MLF_PROFILE_MAX_DEPTH deep is recorded in call order: the
 * function's address, its depth (1: called from outside the model's code), the ticks at entry
 * and exit, and the workspace (TVMBackendAllocWorkspace) it took, padding included. The host
 * maps addresses to names with the firmware's symbol table and picks the operator calls
 * (the executor's calls for graph models, the calls made by __tvm_main__ for AOT models).
 *
 * GCC's hooks take no context, so the records are this file's state, as TVM's workspace
 * functions make the bound workspace the runtime's. Firmware built without the option links
 * none of this.
 */
#ifndef MLF_PROFILE_H_
#define MLF_PROFILE_H_

#include <stddef.h>
#include <stdint.h>

#include "mlf_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef MLF_PROFILE_MAX_RECORDS
#define MLF_PROFILE_MAX_RECORDS 512u
#endif
#ifndef MLF_PROFILE_MAX_DEPTH
#define MLF_PROFILE_MAX_DEPTH 4u
#endif

typedef struct {
  uintptr_t function;
  uint64_t enter_ticks;
  uint64_t exit_ticks;
  uint32_t workspace_bytes; /* peak taken during the call, above what was in use at entry */
  uint16_t depth;
} mlf_profile_record;

/* Forgets earlier records and starts recording; `ws` is the workspace the model draws from
 * (NULL: none to watch). */
void mlf_profile_start(mlf_workspace* ws);

/* Stops recording (calls after this are not recorded). */
void mlf_profile_stop(void);

/* Records held, in call order, and calls not recorded because the table was full. */
uint32_t mlf_profile_count(void);
uint32_t mlf_profile_dropped(void);
const mlf_profile_record* mlf_profile_records(void);

/* The address of mlf_profile_start as the firmware runs: the host compares it with the
 * symbol table to relocate the recorded addresses (position-independent host builds). */
uintptr_t mlf_profile_anchor(void);

#ifdef __cplusplus
}
#endif

#endif /* MLF_PROFILE_H_ */
