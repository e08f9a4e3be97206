/*
 * mlf_cmsis_nn_fully_connected_s16.c — TVM's arm_fully_connected_s16 call on any covered
 * CMSIS-NN: scratch from the linked library's own answer.
 */
#include "mlf_cmsis_nn.h"

arm_cmsis_nn_status mlf_cmsis_nn_fully_connected_s16(
    const cmsis_nn_context* ctx, const cmsis_nn_fc_params* fc_params,
    const cmsis_nn_per_tensor_quant_params* quant_params, const cmsis_nn_dims* input_dims,
    const int16_t* input, const cmsis_nn_dims* filter_dims, const int8_t* filter,
    const cmsis_nn_dims* bias_dims, const int64_t* bias, const cmsis_nn_dims* output_dims,
    int16_t* output) {
  void* held;
  const cmsis_nn_context run =
      mlf_cmsis_nn_context(ctx, arm_fully_connected_s16_get_buffer_size(filter_dims), &held);
  return mlf_cmsis_nn_finish(
      arm_fully_connected_s16(&run, fc_params, quant_params, input_dims, input, filter_dims, filter,
                              bias_dims, bias, output_dims, output),
      held, "arm_fully_connected_s16");
}
