/*
 * mlf_registry.c — function lookup in a system library's registry (TVMFuncRegistry).
 *
 * The names blob starts with the function count: a uint16 (little-endian) since TVM 0.9,
 * a single byte before. Telling the two apart: byte 1 is either the high byte of a uint16
 * count or, in the old layout, the first character of the first name. Names are C
 * identifiers and start with a letter or '_' (0x41..0x7A); a high count byte is below 0x41
 * for every count under 16640. So byte 1 in [A-Za-z_] means the 1-byte layout, anything else
 * (in practice 0x00) the 2-byte one. An empty registry reads as 0 either way.
 * Walking the names also stops at the blob's terminating empty name, so a count larger than
 * the list never reads past the string literal.
 */
#include <string.h>

#include "mlf_internal.h"

static int starts_identifier(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

mlf_status mlf_module_lookup(const TVMModule* lib, const char* name, size_t name_len,
                             TVMBackendPackedCFunc* fn) {
  if (lib == NULL || lib->registry == NULL || lib->registry->names == NULL || fn == NULL) {
    return MLF_ERR_ARGUMENT;
  }
  const unsigned char* blob = (const unsigned char*)lib->registry->names;
  uint32_t count = blob[0];
  const char* entry = (const char*)blob + 1;
  if (!starts_identifier(blob[1])) {
    count |= (uint32_t)blob[1] << 8;
    entry = (const char*)blob + 2;
  }
  for (uint32_t i = 0; i < count && *entry != '\0'; ++i) {
    /* Compare up to the entry's NUL: a name holding a NUL byte matches nothing. */
    size_t k = 0;
    while (k < name_len && entry[k] != '\0' && entry[k] == name[k]) ++k;
    if (k == name_len && entry[k] == '\0') {
      *fn = lib->registry->funcs[i];
      return MLF_OK;
    }
    while (*entry++ != '\0') continue;
  }
  return MLF_ERR_MISSING_FUNCTION;
}

_Static_assert(sizeof(TVMFunctionHandle) == sizeof(TVMBackendPackedCFunc),
               "function handles hold packed function pointers");

int TVMFuncCall(TVMFunctionHandle func, TVMValue* arg_values, int* type_codes, int num_args,
                TVMValue* ret_val, int* ret_type_code) {
  if (func == NULL) {
    TVMAPISetLastError(mlf_why_text(MLF_WHY_NULL_FUNCTION));
    return -1;
  }
  /* A function handle is a TVMBackendPackedCFunc (object and function pointers have the
   * same representation on every target this runtime supports). */
  TVMBackendPackedCFunc packed;
  memcpy(&packed, &func, sizeof(packed));
  return packed(arg_values, type_codes, num_args, ret_val, ret_type_code, NULL);
}

int TVMBackendGetFuncFromEnv(void* mod_node, const char* func_name, TVMFunctionHandle* out) {
  (void)mod_node;
  (void)func_name;
  if (out != NULL) *out = NULL;
  TVMAPISetLastError(mlf_why_text(MLF_WHY_NO_ENVIRONMENT));
  return -1;
}
