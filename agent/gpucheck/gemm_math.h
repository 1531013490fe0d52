#pragma once
// The host-only arithmetic of the gemm check (gemm.cc) and of the GEMM probe
// (bench/gpu/gemm_probe.cc): element types, the spec-sheet peaks, TFLOPS from
// a timing, sample statistics, and the tolerance a GEMM's output elements are
// held to. No CUDA here, so the unit tests link it on a machine without a GPU.
// Every function is pure and thread-safe.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::gpucheck {

// The input types the gemm check multiplies. Every one accumulates in FP32
// (CUBLAS_COMPUTE_32F; TF32 is FP32 storage through TF32 tensor cores).
//   kBf16: BF16 A and B, BF16 D. Every supported GPU (compute capability >= 8.0).
//   kFp8:  FP8 E4M3 A and B (unit scales), BF16 D. Compute capability >= 8.9.
//   kTf32: FP32 A, B and D, CUBLAS_COMPUTE_32F_FAST_TF32.
enum class GemmDtype { kBf16, kFp8, kTf32 };

// "bf16", "fp8", "tf32".
const char* gemm_dtype_name(GemmDtype t);
// The inverse of gemm_dtype_name; nullopt for anything else.
std::optional<GemmDtype> parse_gemm_dtype(std::string_view s);
// Bytes per element of A and B.
int gemm_input_bytes(GemmDtype t);
// Bytes per element of D (and of C, which is D: beta is 0).
int gemm_output_bytes(GemmDtype t);
// Whether a GPU of compute capability major.minor has tensor cores for `t`.
bool gemm_dtype_supported(GemmDtype t, int cc_major, int cc_minor);

struct GemmShape {
  long long m = 0, n = 0, k = 0;
  bool operator==(const GemmShape&) const = default;
};

// The dense (no structured sparsity) tensor-core peak of one GPU for `t`, in
// TFLOPS, from NVIDIA's data sheets (the table and its sources are in
// gemm_math.cc), found by the GPU's name as NVML and CUDA print it ("NVIDIA
// H100 80GB HBM3", "NVIDIA H200", "NVIDIA H100 PCIe"). nullopt for a model
// or type not in the table: the report then says "no spec", never a guess.
std::optional<double> gemm_spec_tflops(std::string_view gpu_name, GemmDtype t);

// 2*m*n*k*iterations / seconds / 1e12. 0 when seconds is not positive.
double gemm_tflops(const GemmShape& s, long long iterations, double seconds);

// Median (the mean of the middle two for an even count) and minimum of
// `v`; nullopt when `v` is empty.
std::optional<double> median_of(std::vector<double> v);
std::optional<double> min_of(const std::vector<double>& v);

// Whether one output element `got` of a GEMM matches the host's reference
// `ref` (the dot product computed in double from the same inputs), where
// `sum_abs` is the sum of |a_i * b_i| over the dot product. The tolerance is
// 1% of |ref| (a BF16 output carries 8 significant bits: 0.4%) plus 2e-4 of
// sum_abs (FP32 accumulation error and, for TF32, inputs rounded to 10
// mantissa bits). With inputs uniform in [-1, 1] and k = 8192, |ref| is
// around 30 and the absolute part around 0.4, so an element computed wrong,
// left unwritten or NaN is caught. NaN or infinite `got` never matches.
bool gemm_element_matches(double got, double ref, double sum_abs);

// Decodes one BF16 (the top 16 bits of an IEEE binary32) and one FP8 E4M3
// (OCP 8-bit floating point: 1 sign, 4 exponent bits with bias 7, 3 mantissa
// bits, no infinities, S.1111.111 is NaN) to float.
float bf16_to_float(std::uint16_t bits);
float fp8_e4m3_to_float(std::uint8_t bits);

}  // namespace kiln::gpucheck
