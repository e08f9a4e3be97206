/*
 * mlf_cmsis_nn_depthwise_conv_wrapper_s16.c — TVM's arm_depthwise_conv_wrapper_s16 call on any
 * covered CMSIS-NN: scratch from the linked library's own answer.
 */
#include "mlf_cmsis_nn.h"

arm_cmsis_nn_status mlf_cmsis_nn_depthwise_conv_wrapper_s16(
    const cmsis_nn_context* ctx, const cmsis_nn_dw_conv_params* dw_conv_params,
    const cmsis_nn_per_channel_quant_params* quant_params, const cmsis_nn_dims* input_dims,
    const int16_t* input, const cmsis_nn_dims* filter_dims, const int8_t* filter,
    const cmsis_nn_dims* bias_dims, const int64_t* bias, const cmsis_nn_dims* output_dims,
    int16_t* output) {
  void* held;
  const cmsis_nn_context run =
      mlf_cmsis_nn_context(ctx,
                           arm_depthwise_conv_wrapper_s16_get_buffer_size(
                               dw_conv_params, input_dims, filter_dims, output_dims),
                           &held);
  return mlf_cmsis_nn_finish(
      arm_depthwise_conv_wrapper_s16(&run, dw_conv_params, quant_params, input_dims, input,
                                     filter_dims, filter, bias_dims, bias, output_dims, output),
      held, "arm_depthwise_conv_wrapper_s16");
}
