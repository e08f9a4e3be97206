/*
 * mlf_cmsis_nn_fully_connected_s8.c — TVM's arm_fully_connected_s8 call with its v4.1.0 meaning on
 * any covered CMSIS-NN. From v5.0.0 the kernel's MVE code reads per-row kernel sums from ctx->buf
 * (its get_buffer_size answers rows * 4 there): plain row sums until v6, bias + input_offset *
 * row sum from v7.0.0. They are computed once per filter (mlf_cmsis_nn_kernel_sums). v6.0.0 began
 * to apply fc_params->filter_offset, which v4.1.0 ignored and TVM always sets to 0 (it offloads
 * only symmetric weights): it is passed as 0.
 */
#include "mlf_cmsis_nn.h"

arm_cmsis_nn_status mlf_cmsis_nn_fully_connected_s8(
    const cmsis_nn_context* ctx, const cmsis_nn_fc_params* fc_params,
    const cmsis_nn_per_tensor_quant_params* quant_params, const cmsis_nn_dims* input_dims,
    const int8_t* input, const cmsis_nn_dims* filter_dims, const int8_t* filter,
    const cmsis_nn_dims* bias_dims, const int32_t* bias, const cmsis_nn_dims* output_dims,
    int8_t* output) {
  const cmsis_nn_fc_params params = {fc_params->input_offset, 0, fc_params->output_offset,
                                     fc_params->activation};
  const int32_t needed = arm_fully_connected_s8_get_buffer_size(filter_dims);
#if MLF_CMSIS_NN_FC_SUMS
  if (needed > 0) {
    /* The buffer holds one int32 per output row (output_dims->c = filter_dims->c, TVM's dims). */
    const int32_t rows = output_dims->c;
    if (needed != rows * (int32_t)sizeof(int32_t)) {
      mlf_cmsis_nn_check(ARM_CMSIS_NN_ARG_ERROR, "arm_fully_connected_s8 (its buffer size)");
    }
    void* held;
    const int32_t* sums = mlf_cmsis_nn_kernel_sums(ctx, filter, bias, fc_params->input_offset, rows,
                                                   filter_dims->n, &held);
    const cmsis_nn_context with_sums = {(void*)(uintptr_t)sums, needed};
    return mlf_cmsis_nn_finish(
        arm_fully_connected_s8(&with_sums, &params, quant_params, input_dims, input, filter_dims,
                               filter, bias_dims, bias, output_dims, output),
        held, "arm_fully_connected_s8");
  }
#endif
  void* held;
  const cmsis_nn_context run = mlf_cmsis_nn_context(ctx, needed, &held);
  return mlf_cmsis_nn_finish(
      arm_fully_connected_s8(&run, &params, quant_params, input_dims, input, filter_dims, filter,
                             bias_dims, bias, output_dims, output),
      held, "arm_fully_connected_s8");
}
