/*
 * mlf_cmsis_nn_convolve_wrapper_s16.c — TVM's arm_convolve_wrapper_s16 call on any covered
 * CMSIS-NN: scratch from the linked library's answer; its int64 bias handed over as
 * cmsis_nn_bias_data where the library takes that (v6.0.0+).
 */
#include "mlf_cmsis_nn.h"

arm_cmsis_nn_status mlf_cmsis_nn_convolve_wrapper_s16(
    const cmsis_nn_context* ctx, const cmsis_nn_conv_params* conv_params,
    const cmsis_nn_per_channel_quant_params* quant_params, const cmsis_nn_dims* input_dims,
    const int16_t* input, const cmsis_nn_dims* filter_dims, const int8_t* filter,
    const cmsis_nn_dims* bias_dims, const int64_t* bias, const cmsis_nn_dims* output_dims,
    int16_t* output) {
  void* held;
  const cmsis_nn_context run = mlf_cmsis_nn_context(
      ctx,
      arm_convolve_wrapper_s16_get_buffer_size(conv_params, input_dims, filter_dims, output_dims),
      &held);
#if MLF_CMSIS_NN_BIAS_DATA
  const cmsis_nn_bias_data bias_data = {bias, false};
  const cmsis_nn_bias_data* given = &bias_data;
#else
  const int64_t* given = bias;
#endif
  return mlf_cmsis_nn_finish(
      arm_convolve_wrapper_s16(&run, conv_params, quant_params, input_dims, input, filter_dims,
                               filter, bias_dims, given, output_dims, output),
      held, "arm_convolve_wrapper_s16");
}
