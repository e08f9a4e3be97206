/*
 * mlf_cmsis_nn_avgpool_s8.c — TVM's arm_avgpool_s8 call on any covered CMSIS-NN: scratch
 * from the linked library's own answer.
 */
#include "mlf_cmsis_nn.h"

arm_cmsis_nn_status mlf_cmsis_nn_avgpool_s8(const cmsis_nn_context* ctx,
                                            const cmsis_nn_pool_params* pool_params,
                                            const cmsis_nn_dims* input_dims, const int8_t* input,
                                            const cmsis_nn_dims* filter_dims,
                                            const cmsis_nn_dims* output_dims, int8_t* output) {
  void* held;
  const cmsis_nn_context run = mlf_cmsis_nn_context(
      ctx, arm_avgpool_s8_get_buffer_size(output_dims->w, input_dims->c), &held);
  return mlf_cmsis_nn_finish(
      arm_avgpool_s8(&run, pool_params, input_dims, input, filter_dims, output_dims, output), held,
      "arm_avgpool_s8");
}
