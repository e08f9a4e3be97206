/*
 * mlf_cmsis_nn_depthwise_conv_wrapper_s8.c — TVM's arm_depthwise_conv_wrapper_s8 call on any
 * covered CMSIS-NN: scratch from the linked library's own answer.
 *
 * A depthwise convolution of one input channel (KWS's first layer: 1 -> 64 channels) is a plain
 * convolution whose filter is the depthwise filter transposed ([1, H, W, C_OUT] -> [C_OUT, H, W,
 * 1]). CMSIS-NN's depthwise code has no fast path for it (a channel multiplier above 1 takes the
 * generic loops); its convolution code has (im2col + DSP/MVE matrix products), with the same
 * integer arithmetic and so the same results. v7.0.0 does this itself on MVE; with
 * MLF_CMSIS_NN_DW_AS_CONV the adapter does it everywhere else, the filter transposed into the
 * scratch after the convolution's own buffer at every call (no RAM kept: the scratch is the
 * operator's workspace while the call runs).
 */
#include "mlf_cmsis_nn.h"

#if MLF_CMSIS_NN_DW_AS_CONV
static int use_conv(const cmsis_nn_dims* input_dims, const cmsis_nn_dims* output_dims) {
#if MLF_CMSIS_NN_DW_NATIVE_MVE && defined(ARM_MATH_MVEI)
  (void)input_dims;
  (void)output_dims;
  return 0; /* the library converts it itself */
#else
  return input_dims->c == 1 && output_dims->c > 1;
#endif
}

static arm_cmsis_nn_status as_conv(const cmsis_nn_context* ctx,
                                   const cmsis_nn_dw_conv_params* dw_conv_params,
                                   const cmsis_nn_per_channel_quant_params* quant_params,
                                   const cmsis_nn_dims* input_dims, const int8_t* input,
                                   const cmsis_nn_dims* filter_dims, const int8_t* filter,
                                   const cmsis_nn_dims* bias_dims, const int32_t* bias,
                                   const cmsis_nn_dims* output_dims, int8_t* output) {
  const cmsis_nn_conv_params conv_params = {
      dw_conv_params->input_offset, dw_conv_params->output_offset, dw_conv_params->stride,
      dw_conv_params->padding,      dw_conv_params->dilation,      dw_conv_params->activation};
  const int32_t out_ch = filter_dims->c;
  const int32_t taps = filter_dims->h * filter_dims->w;
  const cmsis_nn_dims conv_filter_dims = {out_ch, filter_dims->h, filter_dims->w, 1};
  const int32_t conv_bytes = arm_convolve_wrapper_s8_get_buffer_size(
      &conv_params, input_dims, &conv_filter_dims, output_dims);
  const int32_t aligned = (conv_bytes + 15) & ~15;
  const int32_t needed = aligned + out_ch * taps;
  void* held;
  const cmsis_nn_context scratch = mlf_cmsis_nn_context(ctx, needed, &held);
  int8_t* transposed = (int8_t*)scratch.buf + aligned;
  for (int32_t o = 0; o < out_ch; ++o) {
    for (int32_t t = 0; t < taps; ++t) transposed[o * taps + t] = filter[t * out_ch + o];
  }
  const cmsis_nn_context run = {scratch.buf, conv_bytes};
  return mlf_cmsis_nn_finish(
      arm_convolve_wrapper_s8(&run, &conv_params, quant_params, input_dims, input,
                              &conv_filter_dims, transposed, bias_dims, bias, output_dims, output),
      held, "arm_convolve_wrapper_s8 (depthwise, one input channel)");
}
#endif

arm_cmsis_nn_status mlf_cmsis_nn_depthwise_conv_wrapper_s8(
    const cmsis_nn_context* ctx, const cmsis_nn_dw_conv_params* dw_conv_params,
    const cmsis_nn_per_channel_quant_params* quant_params, const cmsis_nn_dims* input_dims,
    const int8_t* input, const cmsis_nn_dims* filter_dims, const int8_t* filter,
    const cmsis_nn_dims* bias_dims, const int32_t* bias, const cmsis_nn_dims* output_dims,
    int8_t* output) {
#if MLF_CMSIS_NN_DW_AS_CONV
  if (use_conv(input_dims, output_dims)) {
    return as_conv(ctx, dw_conv_params, quant_params, input_dims, input, filter_dims, filter,
                   bias_dims, bias, output_dims, output);
  }
#endif
  void* held;
  const cmsis_nn_context run =
      mlf_cmsis_nn_context(ctx,
                           arm_depthwise_conv_wrapper_s8_get_buffer_size(dw_conv_params, input_dims,
                                                                         filter_dims, output_dims),
                           &held);
  return mlf_cmsis_nn_finish(
      arm_depthwise_conv_wrapper_s8(&run, dw_conv_params, quant_params, input_dims, input,
                                    filter_dims, filter, bias_dims, bias, output_dims, output),
      held, "arm_depthwise_conv_wrapper_s8");
}
