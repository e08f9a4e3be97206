/*
 * mlf_cmsis_nn.h — TVM 0.14's CMSIS-NN calls with their v4.1.0 meaning on any covered CMSIS-NN.
 *
 * TVM 0.12-0.18 generated its calls for CMSIS-NN v4.1.0: a cmsis_nn_context sized for the CPU of
 * its target (none without -mcpu), int64 bias pointers for int16 convolutions, no kernel sums.
 * Later releases changed what some calls mean (docs/dependencies.md has the list):
 *
 *   - fully connected s8 on MVE (v5.0.0+) reads per-row kernel sums from ctx->buf: plain row
 *     sums until v6, "effective bias" (bias + input_offset * row sum) from v7.0.0;
 *   - fully connected s8 applies fc_params->filter_offset (v6.0.0+), which v4.1.0 ignored;
 *   - arm_convolve_wrapper_s16 takes a cmsis_nn_bias_data struct instead of an int64 pointer
 *     (v6.0.0+);
 *   - the kernels the wrappers choose need other scratch sizes (v6's 16-lane MVE im2col, v7's
 *     depthwise-as-convolution for one input channel, ...).
 *
 * The project renames the calls in the model's code (arm_X -> mlf_cmsis_nn_X, INTERFACE
 * definitions of the CMSIS-NN library) onto these functions, which are compiled into the library
 * with its flags and headers. Each sizes its scratch from the linked library's own
 * *_get_buffer_size answer (the caller's context when it is big enough, else that many bytes of
 * the runtime's workspace, TVMBackendAllocWorkspace, given back before the call returns: the
 * generator sizes each operator's workspace window for it), computes what the kernel expects
 * beside its arguments, runs it, and stops the firmware on a failure TVM's generated code would
 * ignore, or when the window is too small. One public function per file.
 *
 * Configuration (compile definitions the generator derives from the CMSIS-NN tree and the model):
 *   MLF_CMSIS_NN_FC_SUMS          0: no kernel sums; 1: row sums; 2: effective bias (v7.0.0+)
 *   MLF_CMSIS_NN_BIAS_DATA        1: arm_convolve_wrapper_s16 takes cmsis_nn_bias_data (v6.0.0+)
 *   MLF_CMSIS_NN_DW_AS_CONV       1: the adapter runs a depthwise convolution of one input channel
 *                                 as a convolution (its filter transposed into scratch);
 *   MLF_CMSIS_NN_DW_NATIVE_MVE    1: the library does that itself on MVE (v7.0.0+)
 *   MLF_CMSIS_NN_SUM_SLOTS        fully connected layers whose kernel sums are kept
 *   MLF_CMSIS_NN_SUM_WORDS        int32 words for them (0: computed into scratch at every call)
 */
#ifndef MLF_CMSIS_NN_H_
#define MLF_CMSIS_NN_H_

#include <stddef.h>
#include <stdint.h>

#include "arm_nnfunctions.h"

#ifndef MLF_CMSIS_NN_FC_SUMS
#define MLF_CMSIS_NN_FC_SUMS 0
#endif
#ifndef MLF_CMSIS_NN_BIAS_DATA
#define MLF_CMSIS_NN_BIAS_DATA 0
#endif
#ifndef MLF_CMSIS_NN_DW_AS_CONV
#define MLF_CMSIS_NN_DW_AS_CONV 0
#endif
#ifndef MLF_CMSIS_NN_DW_NATIVE_MVE
#define MLF_CMSIS_NN_DW_NATIVE_MVE 0
#endif
#ifndef MLF_CMSIS_NN_SUM_SLOTS
#define MLF_CMSIS_NN_SUM_SLOTS 0
#endif
#ifndef MLF_CMSIS_NN_SUM_WORDS
#define MLF_CMSIS_NN_SUM_WORDS 0
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* --- TVM 0.14's calls (the model's code is renamed onto these) ---------------------------- */

arm_cmsis_nn_status mlf_cmsis_nn_convolve_wrapper_s8(
    const cmsis_nn_context* ctx, const cmsis_nn_conv_params* conv_params,
    const cmsis_nn_per_channel_quant_params* quant_params, const cmsis_nn_dims* input_dims,
    const int8_t* input, const cmsis_nn_dims* filter_dims, const int8_t* filter,
    const cmsis_nn_dims* bias_dims, const int32_t* bias, const cmsis_nn_dims* output_dims,
    int8_t* output);

arm_cmsis_nn_status mlf_cmsis_nn_convolve_wrapper_s16(
    const cmsis_nn_context* ctx, const cmsis_nn_conv_params* conv_params,
    const cmsis_nn_per_channel_quant_params* quant_params, const cmsis_nn_dims* input_dims,
    const int16_t* input, const cmsis_nn_dims* filter_dims, const int8_t* filter,
    const cmsis_nn_dims* bias_dims, const int64_t* bias, const cmsis_nn_dims* output_dims,
    int16_t* output);

arm_cmsis_nn_status mlf_cmsis_nn_depthwise_conv_wrapper_s8(
    const cmsis_nn_context* ctx, const cmsis_nn_dw_conv_params* dw_conv_params,
    const cmsis_nn_per_channel_quant_params* quant_params, const cmsis_nn_dims* input_dims,
    const int8_t* input, const cmsis_nn_dims* filter_dims, const int8_t* filter,
    const cmsis_nn_dims* bias_dims, const int32_t* bias, const cmsis_nn_dims* output_dims,
    int8_t* output);

arm_cmsis_nn_status mlf_cmsis_nn_depthwise_conv_wrapper_s16(
    const cmsis_nn_context* ctx, const cmsis_nn_dw_conv_params* dw_conv_params,
    const cmsis_nn_per_channel_quant_params* quant_params, const cmsis_nn_dims* input_dims,
    const int16_t* input, const cmsis_nn_dims* filter_dims, const int8_t* filter,
    const cmsis_nn_dims* bias_dims, const int64_t* bias, const cmsis_nn_dims* output_dims,
    int16_t* output);

arm_cmsis_nn_status mlf_cmsis_nn_fully_connected_s8(
    const cmsis_nn_context* ctx, const cmsis_nn_fc_params* fc_params,
    const cmsis_nn_per_tensor_quant_params* quant_params, const cmsis_nn_dims* input_dims,
    const int8_t* input, const cmsis_nn_dims* filter_dims, const int8_t* filter,
    const cmsis_nn_dims* bias_dims, const int32_t* bias, const cmsis_nn_dims* output_dims,
    int8_t* output);

arm_cmsis_nn_status mlf_cmsis_nn_fully_connected_s16(
    const cmsis_nn_context* ctx, const cmsis_nn_fc_params* fc_params,
    const cmsis_nn_per_tensor_quant_params* quant_params, const cmsis_nn_dims* input_dims,
    const int16_t* input, const cmsis_nn_dims* filter_dims, const int8_t* filter,
    const cmsis_nn_dims* bias_dims, const int64_t* bias, const cmsis_nn_dims* output_dims,
    int16_t* output);

arm_cmsis_nn_status mlf_cmsis_nn_avgpool_s8(const cmsis_nn_context* ctx,
                                            const cmsis_nn_pool_params* pool_params,
                                            const cmsis_nn_dims* input_dims, const int8_t* input,
                                            const cmsis_nn_dims* filter_dims,
                                            const cmsis_nn_dims* output_dims, int8_t* output);

arm_cmsis_nn_status mlf_cmsis_nn_avgpool_s16(const cmsis_nn_context* ctx,
                                             const cmsis_nn_pool_params* pool_params,
                                             const cmsis_nn_dims* input_dims, const int16_t* input,
                                             const cmsis_nn_dims* filter_dims,
                                             const cmsis_nn_dims* output_dims, int16_t* output);

/* --- shared by the calls (mlf_cmsis_nn_memory.c) --------------------------------------------- */

/* The context to run a kernel with: the caller's when it holds `needed` bytes, else `needed`
 * bytes of the workspace (mlf_cmsis_nn_scratch), which *held then points at (else NULL) for
 * mlf_cmsis_nn_release / mlf_cmsis_nn_finish once the kernel has run. */
cmsis_nn_context mlf_cmsis_nn_context(const cmsis_nn_context* given, int32_t needed, void** held);

/* `needed` bytes of the runtime's workspace (the calling operator's window), 64-byte aligned;
 * stops the firmware, naming the bytes, when the workspace refuses them. */
void* mlf_cmsis_nn_scratch(int32_t needed);

/* Gives back what mlf_cmsis_nn_scratch took (NULL: nothing); blocks go back last in, first out. */
void mlf_cmsis_nn_release(void* held);

/* The kernel sums arm_fully_connected_s8 expects for this filter (MLF_CMSIS_NN_FC_SUMS): kept
 * from the first call in a free slot, else computed at every call into the caller's context
 * (when it holds `rows` words) or the workspace (*held, for mlf_cmsis_nn_release). */
const int32_t* mlf_cmsis_nn_kernel_sums(const cmsis_nn_context* given, const int8_t* filter,
                                        const int32_t* bias, int32_t input_offset, int32_t rows,
                                        int32_t cols, void** held);

/* A kernel's status: returns it when it succeeded, else stops the firmware naming the kernel
 * (TVM's generated code ignores every status, so a failure would be a silent wrong answer). */
arm_cmsis_nn_status mlf_cmsis_nn_check(arm_cmsis_nn_status status, const char* kernel);

/* The end of a call: gives back `held` (mlf_cmsis_nn_release), then mlf_cmsis_nn_check. */
arm_cmsis_nn_status mlf_cmsis_nn_finish(arm_cmsis_nn_status status, void* held, const char* kernel);

/* From the firmware's platform (mlf_platform.h) and runtime (tvm/runtime/c_backend_api.h): the
 * library is compiled without their headers. */
void mlf_platform_log(const char* msg);
void mlf_platform_abort(int code);
void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes, int dtype_code_hint,
                               int dtype_bits_hint);
int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr);

#ifdef __cplusplus
}
#endif

#endif /* MLF_CMSIS_NN_H_ */
