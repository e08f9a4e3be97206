/*
 * mlf_cmsis_nn_scratch.c — scratch memory for CMSIS-NN kernels that TVM called without any.
 *
 * TVM sizes each kernel's scratch buffer (the cmsis_nn_context it passes) for the CPU its
 * target names; a target without -mcpu gets {NULL, 0} everywhere. CMSIS-NN built for a core
 * with DSP or MVE then finds no buffer where its faster code needs one, returns an error that
 * TVM's generated code ignores, and the model predicts garbage. Rather than build the slower
 * portable code, the project renames the entry points TVM calls (arm_X -> mlf_cmsis_nn_X, an
 * INTERFACE definition of the CMSIS-NN library: the model's code sees it, the library does
 * not) and lands them here: a call whose context is smaller than the kernel needs gets this
 * static buffer instead (kernels run one at a time), then the real kernel runs.
 *
 * Compiled into the CMSIS-NN library (its flags and headers), for CMSIS-NN >= 4.
 */
#include <stddef.h>
#include <stdint.h>

#include "arm_nnfunctions.h"

#ifndef MLF_CMSIS_NN_SCRATCH_BYTES
#define MLF_CMSIS_NN_SCRATCH_BYTES 8192
#endif

/* From the firmware's platform (mlf_platform.h). */
void mlf_platform_log(const char* msg);
void mlf_platform_abort(int code);

static int32_t scratch[(MLF_CMSIS_NN_SCRATCH_BYTES + 3) / 4];

/* The context to run with: the caller's when its buffer is big enough (TVM sized it for the
 * CPU its target named, which may be less than this build's), else the static scratch; a
 * need beyond that stops the firmware (abort code = bytes needed). */
static cmsis_nn_context with_scratch(const cmsis_nn_context* given, int32_t needed) {
  if (needed <= 0 || (given->buf != NULL && given->size >= needed)) {
    return *given;
  }
  if (needed > (int32_t)sizeof scratch) {
    mlf_platform_log(
        "mlf: cmsis-nn: a kernel needs more scratch than MLF_CMSIS_NN_SCRATCH_BYTES "
        "(abort code = bytes needed)");
    mlf_platform_abort((int)needed);
  }
  cmsis_nn_context ctx = {scratch, needed};
  return ctx;
}

#define MLF_CONV_LIKE(name, params_t, quant_t, in_t, bias_t, out_t)                           \
  arm_cmsis_nn_status mlf_cmsis_nn_##name(                                                    \
      const cmsis_nn_context* ctx, const params_t* params, const quant_t* quant,              \
      const cmsis_nn_dims* input_dims, const in_t* input, const cmsis_nn_dims* filter_dims,   \
      const int8_t* filter, const cmsis_nn_dims* bias_dims, const bias_t* bias,               \
      const cmsis_nn_dims* output_dims, out_t* output);                                       \
  arm_cmsis_nn_status mlf_cmsis_nn_##name(                                                    \
      const cmsis_nn_context* ctx, const params_t* params, const quant_t* quant,              \
      const cmsis_nn_dims* input_dims, const in_t* input, const cmsis_nn_dims* filter_dims,   \
      const int8_t* filter, const cmsis_nn_dims* bias_dims, const bias_t* bias,               \
      const cmsis_nn_dims* output_dims, out_t* output) {                                      \
    cmsis_nn_context run = with_scratch(ctx, MLF_NEED_##name);                                \
    return arm_##name(&run, params, quant, input_dims, input, filter_dims, filter, bias_dims, \
                      bias, output_dims, output);                                             \
  }

#define MLF_NEED_convolve_wrapper_s8 \
  arm_convolve_wrapper_s8_get_buffer_size(params, input_dims, filter_dims, output_dims)
#define MLF_NEED_convolve_wrapper_s16 \
  arm_convolve_wrapper_s16_get_buffer_size(params, input_dims, filter_dims, output_dims)
#define MLF_NEED_depthwise_conv_wrapper_s8 \
  arm_depthwise_conv_wrapper_s8_get_buffer_size(params, input_dims, filter_dims, output_dims)
#define MLF_NEED_depthwise_conv_wrapper_s16 \
  arm_depthwise_conv_wrapper_s16_get_buffer_size(params, input_dims, filter_dims, output_dims)
#define MLF_NEED_fully_connected_s8 arm_fully_connected_s8_get_buffer_size(filter_dims)
#define MLF_NEED_fully_connected_s16 arm_fully_connected_s16_get_buffer_size(filter_dims)

MLF_CONV_LIKE(convolve_wrapper_s8, cmsis_nn_conv_params, cmsis_nn_per_channel_quant_params, int8_t,
              int32_t, int8_t)
MLF_CONV_LIKE(convolve_wrapper_s16, cmsis_nn_conv_params, cmsis_nn_per_channel_quant_params,
              int16_t, int64_t, int16_t)
MLF_CONV_LIKE(depthwise_conv_wrapper_s8, cmsis_nn_dw_conv_params, cmsis_nn_per_channel_quant_params,
              int8_t, int32_t, int8_t)
MLF_CONV_LIKE(depthwise_conv_wrapper_s16, cmsis_nn_dw_conv_params,
              cmsis_nn_per_channel_quant_params, int16_t, int64_t, int16_t)
MLF_CONV_LIKE(fully_connected_s8, cmsis_nn_fc_params, cmsis_nn_per_tensor_quant_params, int8_t,
              int32_t, int8_t)
MLF_CONV_LIKE(fully_connected_s16, cmsis_nn_fc_params, cmsis_nn_per_tensor_quant_params, int16_t,
              int64_t, int16_t)

#define MLF_POOL(name, t)                                                                 \
  arm_cmsis_nn_status mlf_cmsis_nn_##name(                                                \
      const cmsis_nn_context* ctx, const cmsis_nn_pool_params* params,                    \
      const cmsis_nn_dims* input_dims, const t* input, const cmsis_nn_dims* filter_dims,  \
      const cmsis_nn_dims* output_dims, t* output);                                       \
  arm_cmsis_nn_status mlf_cmsis_nn_##name(                                                \
      const cmsis_nn_context* ctx, const cmsis_nn_pool_params* params,                    \
      const cmsis_nn_dims* input_dims, const t* input, const cmsis_nn_dims* filter_dims,  \
      const cmsis_nn_dims* output_dims, t* output) {                                      \
    cmsis_nn_context run =                                                                \
        with_scratch(ctx, arm_##name##_get_buffer_size(output_dims->w, input_dims->c));   \
    return arm_##name(&run, params, input_dims, input, filter_dims, output_dims, output); \
  }

MLF_POOL(avgpool_s8, int8_t)
MLF_POOL(avgpool_s16, int16_t)
