/*
 * mlf_cmsis_nn_convolve_wrapper_s8.c — TVM's arm_convolve_wrapper_s8 call on any covered CMSIS-NN:
 * scratch from the linked library's own answer (TVM sized it for its target's CPU, or not at all).
 */
#include "mlf_cmsis_nn.h"

arm_cmsis_nn_status mlf_cmsis_nn_convolve_wrapper_s8(
    const cmsis_nn_context* ctx, const cmsis_nn_conv_params* conv_params,
    const cmsis_nn_per_channel_quant_params* quant_params, const cmsis_nn_dims* input_dims,
    const int8_t* input, const cmsis_nn_dims* filter_dims, const int8_t* filter,
    const cmsis_nn_dims* bias_dims, const int32_t* bias, const cmsis_nn_dims* output_dims,
    int8_t* output) {
  void* held;
  const cmsis_nn_context run = mlf_cmsis_nn_context(
      ctx,
      arm_convolve_wrapper_s8_get_buffer_size(conv_params, input_dims, filter_dims, output_dims),
      &held);
  return mlf_cmsis_nn_finish(
      arm_convolve_wrapper_s8(&run, conv_params, quant_params, input_dims, input, filter_dims,
                              filter, bias_dims, bias, output_dims, output),
      held, "arm_convolve_wrapper_s8");
}
