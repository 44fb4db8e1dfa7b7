// The constants of the ops' math: one home for the reference kernels (src/kernels/ref) and the
// StableHLO lowering (src/record/lower_ops.cpp), which must compute the same f32 values.
#pragma once

namespace skainet::kernels {

// GELU's tanh approximation as ggml_gelu_f32 writes it:
// 0.5 x (1 + tanh(sqrt(2/pi) x (1 + kGeluCoefA x²))).
inline constexpr float kGeluCoefA = 0.044715f;
inline constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;

// gpt-oss's clamped SwiGLU (ggml_swiglu_oai; llama.cpp fixes both for LLM_FFN_SWIGLU_OAI_MOE):
// g = min(gate, limit), u = clamp(up, -limit, limit), g / (1 + exp(-alpha g)) * (u + 1).
inline constexpr float kOaiSwigluAlpha = 1.702f;
inline constexpr float kOaiSwigluLimit = 7.0f;

// A mixture of experts' routing (ops::expert_weights) divides the chosen probabilities by their sum
// clamped below at this, the smallest normal F16, as llama.cpp does.
inline constexpr float kMinChosenExpertSum = 6.103515625e-5f;

}  // namespace skainet::kernels
