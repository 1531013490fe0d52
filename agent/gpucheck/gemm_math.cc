#include "agent/gpucheck/gemm_math.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

namespace kiln::gpucheck {

namespace {

// Dense tensor-core peaks per GPU, TFLOPS. NVIDIA's data sheets print the
// tensor-core figures "with sparsity" (2:4 structured sparsity doubles them);
// the dense figure, which is what a dense GEMM can reach, is half of that.
//
//   H100 SXM5, H100 PCIe, H100 NVL: "NVIDIA H100 Tensor Core GPU" data sheet
//     (nvidia.com/en-us/data-center/h100/, datasheet 2023-2024): BF16
//     1,979 / 1,513 / 1,671 TFLOPS*, FP8 3,958 / 3,026 / 3,341 TFLOPS*,
//     TF32 989 / 756 / 835 TFLOPS* (* with sparsity). 989.4 is the exact
//     dense SXM figure: 132 SMs x 4096 dense BF16 FLOP per clock x 1830 MHz.
//   H200 SXM, H200 NVL: "NVIDIA H200 Tensor Core GPU" data sheet
//     (nvidia.com/en-us/data-center/h200/): the same tensor cores and clocks
//     as H100 SXM (BF16 1,979*, FP8 3,958*, TF32 989*) and, for the NVL
//     card, as H100 NVL (1,671*, 3,341*, 835*).
//   A100 (SXM4 and PCIe, 40 and 80 GB): "NVIDIA A100 Tensor Core GPU" data
//     sheet: BF16 312 | 624* TFLOPS, TF32 156 | 312*; no FP8.
//   L40S: "NVIDIA L40S" data sheet: BF16 362.05 | 733*, FP8 733 | 1,466*,
//     TF32 183 | 366*.
//   B200: left out on purpose. NVIDIA has printed more than one set of
//     figures for it (HGX B200 at 1000 W against DGX B200, and revisions of
//     the HGX page), so no single dense BF16 figure is certain; a B200
//     reports "no spec" until one is measured against a settled data sheet.
//   H100 under any other name (H100 SXM5 64GB "NVIDIA H100", H800, H20,
//   GH200): not in the table, reported as "no spec".
struct SpecRow {
  const char* model;          // the model token of the NVML name, upper case
  const char* variant;        // a further token that must be present, "" = none
  const char* not_variant;    // a token that must be absent, "" = none
  std::optional<double> bf16, fp8, tf32;
};

const SpecRow kSpecs[] = {
    {"H100", "PCIE", "", 756.0, 1513.0, 378.0},
    {"H100", "NVL", "", 835.0, 1671.0, 417.5},
    {"H100", "HBM3", "", 989.4, 1978.9, 494.7},  // "NVIDIA H100 80GB HBM3": the SXM5 module
    {"H100", "SXM5", "", 989.4, 1978.9, 494.7},
    {"H100", "SXM", "", 989.4, 1978.9, 494.7},
    {"H200", "NVL", "", 835.0, 1671.0, 417.5},
    {"H200", "", "NVL", 989.4, 1978.9, 494.7},   // "NVIDIA H200": the SXM module
    {"A100", "", "", 312.0, std::nullopt, 156.0},
    {"L40S", "", "", 362.05, 733.0, 183.0},
};

// "NVIDIA A100-SXM4-80GB" -> {"NVIDIA", "A100", "SXM4", "80GB"}, upper case.
std::vector<std::string> name_tokens(std::string_view name) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : name) {
    if (c == ' ' || c == '-' || c == '_') {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

}  // namespace

const char* gemm_dtype_name(GemmDtype t) {
  switch (t) {
    case GemmDtype::kBf16: return "bf16";
    case GemmDtype::kFp8: return "fp8";
    case GemmDtype::kTf32: return "tf32";
  }
  return "bf16";
}

std::optional<GemmDtype> parse_gemm_dtype(std::string_view s) {
  for (GemmDtype t : {GemmDtype::kBf16, GemmDtype::kFp8, GemmDtype::kTf32})
    if (s == gemm_dtype_name(t)) return t;
  return std::nullopt;
}

int gemm_input_bytes(GemmDtype t) {
  switch (t) {
    case GemmDtype::kBf16: return 2;
    case GemmDtype::kFp8: return 1;
    case GemmDtype::kTf32: return 4;
  }
  return 4;
}

int gemm_output_bytes(GemmDtype t) { return t == GemmDtype::kTf32 ? 4 : 2; }

bool gemm_dtype_supported(GemmDtype t, int cc_major, int cc_minor) {
  const int cc = cc_major * 10 + cc_minor;
  // FP8 tensor cores arrived with Ada (8.9) and Hopper (9.0); BF16 and TF32
  // with Ampere (8.0).
  return t == GemmDtype::kFp8 ? cc >= 89 : cc >= 80;
}

std::optional<double> gemm_spec_tflops(std::string_view gpu_name, GemmDtype t) {
  const std::vector<std::string> tokens = name_tokens(gpu_name);
  auto has = [&](const char* tok) { return std::find(tokens.begin(), tokens.end(), tok) != tokens.end(); };
  for (const SpecRow& row : kSpecs) {
    if (!has(row.model)) continue;
    if (row.variant[0] != '\0' && !has(row.variant)) continue;
    if (row.not_variant[0] != '\0' && has(row.not_variant)) continue;
    switch (t) {
      case GemmDtype::kBf16: return row.bf16;
      case GemmDtype::kFp8: return row.fp8;
      case GemmDtype::kTf32: return row.tf32;
    }
  }
  return std::nullopt;
}

double gemm_tflops(const GemmShape& s, long long iterations, double seconds) {
  if (!(seconds > 0)) return 0;
  return 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k) *
         static_cast<double>(iterations) / seconds / 1e12;
}

std::optional<double> median_of(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  const std::size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

std::optional<double> min_of(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  return *std::min_element(v.begin(), v.end());
}

bool gemm_element_matches(double got, double ref, double sum_abs) {
  if (!std::isfinite(got) || !std::isfinite(ref)) return false;
  const double tolerance = 0.01 * std::fabs(ref) + 2e-4 * std::fabs(sum_abs);
  return std::fabs(got - ref) <= tolerance;
}

float bf16_to_float(std::uint16_t bits) {
  const std::uint32_t w = static_cast<std::uint32_t>(bits) << 16;
  float f = 0;
  std::memcpy(&f, &w, sizeof f);
  return f;
}

float fp8_e4m3_to_float(std::uint8_t bits) {
  const bool negative = (bits & 0x80) != 0;
  const int exponent = (bits >> 3) & 0xf;
  const int mantissa = bits & 0x7;
  float v = 0;
  if (exponent == 0xf && mantissa == 0x7) return std::nanf("");
  if (exponent == 0) v = std::ldexp(static_cast<float>(mantissa) / 8.0f, -6);   // subnormal
  else v = std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
  return negative ? -v : v;
}

}  // namespace kiln::gpucheck
