// The gemm check's host-only parts (agent/gpucheck/gemm_math.h,
// gemm_verdict.h): the spec table by the names NVML prints, the TFLOPS
// arithmetic, the statistics, the element tolerance that keeps a broken GEMM
// from reporting a figure, and the verdict: floors, throttle reasons, the
// report's shape (the one the price per TFLOP reads).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "agent/gpucheck/gemm_math.h"
#include "agent/gpucheck/gemm_verdict.h"

using kiln::agent::CheckStatus;
using kiln::gpucheck::GemmDtype;
using kiln::gpucheck::GemmGpuRun;
using kiln::gpucheck::GemmShape;
using kiln::gpucheck::GemmTypeRun;
using nlohmann::json;

namespace {

constexpr std::uint64_t kSwPowerCap = 0x4, kHwSlowdown = 0x8, kPowerBrake = 0x80;

GemmGpuRun gpu(int index, const char* name, std::vector<double> tflops, std::uint64_t mask = 0) {
  GemmGpuRun g;
  g.index = index;
  g.name = name;
  g.shape = {16384, 16384, 8192};
  g.algo = {{"id", 66}, {"rank", 0}};
  g.tflops = std::move(tflops);
  g.sm_clock_mhz = {1980, 1755, 1770};
  g.power_w = {690.5, 699.0, 700.1};
  g.throttle_mask = mask;
  g.nvml_sampled = true;
  return g;
}

GemmTypeRun type_run(GemmDtype t, std::vector<GemmGpuRun> gpus) {
  GemmTypeRun r;
  r.dtype = t;
  r.gpus = std::move(gpus);
  return r;
}

std::string reasons(const kiln::agent::CheckResult& r) { return r.details.value("reasons", json::array()).dump(); }
std::string warnings(const kiln::agent::CheckResult& r) { return r.details.value("warnings", json::array()).dump(); }

}  // namespace

TEST_CASE("gemm spec: dense peaks found by the names NVML prints", "[gemm]") {
  using kiln::gpucheck::gemm_spec_tflops;
  CHECK(gemm_spec_tflops("NVIDIA H100 80GB HBM3", GemmDtype::kBf16) == 989.4);
  CHECK(gemm_spec_tflops("NVIDIA H100 80GB HBM3", GemmDtype::kFp8) == 1978.9);
  CHECK(gemm_spec_tflops("NVIDIA H200", GemmDtype::kBf16) == 989.4);
  CHECK(gemm_spec_tflops("NVIDIA H200", GemmDtype::kFp8) == 1978.9);
  CHECK(gemm_spec_tflops("NVIDIA H100 PCIe", GemmDtype::kBf16) == 756.0);
  CHECK(gemm_spec_tflops("NVIDIA H100 PCIe", GemmDtype::kFp8) == 1513.0);
  CHECK(gemm_spec_tflops("NVIDIA H100 NVL", GemmDtype::kBf16) == 835.0);
  CHECK(gemm_spec_tflops("NVIDIA H100 NVL", GemmDtype::kFp8) == 1671.0);
  CHECK(gemm_spec_tflops("NVIDIA H200 NVL", GemmDtype::kBf16) == 835.0);
  CHECK(gemm_spec_tflops("NVIDIA A100-SXM4-80GB", GemmDtype::kBf16) == 312.0);
  CHECK(gemm_spec_tflops("NVIDIA A100 80GB PCIe", GemmDtype::kBf16) == 312.0);
  CHECK_FALSE(gemm_spec_tflops("NVIDIA A100-SXM4-80GB", GemmDtype::kFp8));  // Ampere has no FP8
  CHECK(gemm_spec_tflops("NVIDIA L40S", GemmDtype::kBf16) == 362.05);
  CHECK(gemm_spec_tflops("NVIDIA L40S", GemmDtype::kFp8) == 733.0);
  CHECK(gemm_spec_tflops("nvidia h100 pcie", GemmDtype::kBf16) == 756.0);  // case does not matter
  // Names that contain a known model's letters but are other GPUs: no spec, never a guess.
  CHECK_FALSE(gemm_spec_tflops("NVIDIA GH200 480GB", GemmDtype::kBf16));
  CHECK_FALSE(gemm_spec_tflops("NVIDIA H20", GemmDtype::kBf16));
  CHECK_FALSE(gemm_spec_tflops("NVIDIA H800", GemmDtype::kBf16));
  CHECK_FALSE(gemm_spec_tflops("NVIDIA A100X", GemmDtype::kBf16));
  CHECK_FALSE(gemm_spec_tflops("NVIDIA H100", GemmDtype::kBf16));  // which H100 is unknown
  CHECK_FALSE(gemm_spec_tflops("NVIDIA B200", GemmDtype::kBf16));
  CHECK_FALSE(gemm_spec_tflops("Tesla V100-SXM2-32GB", GemmDtype::kBf16));
  CHECK_FALSE(gemm_spec_tflops("", GemmDtype::kBf16));
}

TEST_CASE("gemm arithmetic: TFLOPS, median and minimum", "[gemm]") {
  using namespace kiln::gpucheck;
  // 2 * 8192^3 FLOP per GEMM, 100 of them in one second.
  CHECK(gemm_tflops({8192, 8192, 8192}, 100, 1.0) == Approx(109.951162778));
  CHECK(gemm_tflops({16384, 16384, 8192}, 8, 0.1) == Approx(351.843720888));
  CHECK(gemm_tflops({8192, 8192, 8192}, 100, 0.0) == 0.0);
  CHECK(gemm_tflops({8192, 8192, 8192}, 100, -1.0) == 0.0);
  CHECK(median_of({3, 1, 2}) == 2.0);
  CHECK(median_of({4, 1, 3, 2}) == 2.5);
  CHECK_FALSE(median_of({}));
  CHECK(min_of({3, 1, 2}) == 1.0);
  CHECK_FALSE(min_of({}));
}

TEST_CASE("gemm types: names, sizes and which GPUs have them", "[gemm]") {
  using namespace kiln::gpucheck;
  CHECK(parse_gemm_dtype("bf16") == GemmDtype::kBf16);
  CHECK(parse_gemm_dtype("fp8") == GemmDtype::kFp8);
  CHECK(parse_gemm_dtype("tf32") == GemmDtype::kTf32);
  CHECK_FALSE(parse_gemm_dtype("BF16"));
  CHECK_FALSE(parse_gemm_dtype("fp16"));
  CHECK(gemm_input_bytes(GemmDtype::kFp8) == 1);
  CHECK(gemm_output_bytes(GemmDtype::kFp8) == 2);
  CHECK(gemm_input_bytes(GemmDtype::kTf32) == 4);
  CHECK(gemm_dtype_supported(GemmDtype::kFp8, 9, 0));
  CHECK(gemm_dtype_supported(GemmDtype::kFp8, 8, 9));
  CHECK_FALSE(gemm_dtype_supported(GemmDtype::kFp8, 8, 0));
  CHECK(gemm_dtype_supported(GemmDtype::kBf16, 8, 0));
  CHECK_FALSE(gemm_dtype_supported(GemmDtype::kBf16, 7, 5));
}

TEST_CASE("gemm element check: a right element passes, a wrong, unwritten or NaN one fails", "[gemm]") {
  using kiln::gpucheck::gemm_element_matches;
  // k = 8192, inputs uniform in [-1, 1): sum |a*b| ~ 2048, |ref| ~ 30.
  CHECK(gemm_element_matches(31.25, 31.2, 2048));        // BF16 rounding of the output
  CHECK(gemm_element_matches(-12.0, -12.3, 2048));       // within 0.01*12.3 + 0.41
  CHECK_FALSE(gemm_element_matches(0.0, 31.2, 2048));    // left unwritten (zeros)
  CHECK_FALSE(gemm_element_matches(-31.2, 31.2, 2048));  // wrong sign / transposed operand
  CHECK_FALSE(gemm_element_matches(35.0, 31.2, 2048));
  CHECK_FALSE(gemm_element_matches(std::nan(""), 31.2, 2048));
  CHECK_FALSE(gemm_element_matches(INFINITY, 31.2, 2048));
}

TEST_CASE("gemm decoding: BF16 and FP8 E4M3 bit patterns", "[gemm]") {
  using namespace kiln::gpucheck;
  CHECK(bf16_to_float(0x3f80) == 1.0f);
  CHECK(bf16_to_float(0xc000) == -2.0f);
  CHECK(std::isnan(bf16_to_float(0xffff)));  // what verify() fills D with
  CHECK(fp8_e4m3_to_float(0x38) == 1.0f);
  CHECK(fp8_e4m3_to_float(0xb8) == -1.0f);
  CHECK(fp8_e4m3_to_float(0x7e) == 448.0f);   // the largest finite E4M3
  CHECK(fp8_e4m3_to_float(0x01) == std::ldexp(1.0f, -9));  // the smallest subnormal
  CHECK(fp8_e4m3_to_float(0x00) == 0.0f);
  CHECK(fp8_e4m3_to_float(0x34) == 0.75f);
  CHECK(std::isnan(fp8_e4m3_to_float(0x7f)));
  CHECK(std::isnan(fp8_e4m3_to_float(0xff)));
}

TEST_CASE("gemm verdict: healthy H100s pass, and the report has the agreed shape", "[gemm]") {
  auto r = kiln::gpucheck::gemm_verdict(
      {type_run(GemmDtype::kBf16, {gpu(0, "NVIDIA H100 80GB HBM3", {760, 750, 755}, kSwPowerCap),
                                   gpu(1, "NVIDIA H100 80GB HBM3", {740, 745, 748})}),
       type_run(GemmDtype::kFp8, {gpu(0, "NVIDIA H100 80GB HBM3", {1400, 1410}),
                                  gpu(1, "NVIDIA H100 80GB HBM3", {1395, 1400})})},
      {std::nullopt, 0.7}, 20);
  INFO(r.to_json().dump(2));
  CHECK(r.status == CheckStatus::kPass);
  CHECK(r.name == "gemm");
  CHECK(r.unit == "TFLOPS");
  CHECK(r.value == 745.0);  // the slowest GPU's median
  CHECK(r.threshold["min"].get<double>() == Approx(0.7 * 989.4));
  const json& d = r.details;
  CHECK(d["dtype"] == "bf16");
  CHECK(d["seconds"] == 20);
  CHECK(d["shape"] == json{{"m", 16384}, {"n", 16384}, {"k", 8192}});
  CHECK(d["node_tflops"].get<double>() == Approx(755 + 745));
  CHECK(d["spec_tflops"] == 989.4);
  REQUIRE(d["per_gpu"].size() == 2);
  const json& g0 = d["per_gpu"][0];
  CHECK(g0["index"] == 0);
  CHECK(g0["name"] == "NVIDIA H100 80GB HBM3");
  CHECK(g0["tflops_min"] == 750.0);
  CHECK(g0["tflops_median"] == 755.0);
  CHECK(g0["sm_clock_mhz_median"] == 1770.0);
  CHECK(g0["power_w_median"] == 699.0);
  CHECK(g0["throttle_reasons"] == json{"sw_power_cap"});
  CHECK(d["per_gpu"][1]["throttle_reasons"] == json::array());
  CHECK(d["fp8"]["node_tflops"].get<double>() == Approx(1405 + 1397.5));
  CHECK(d["fp8"]["spec_tflops"] == 1978.9);
  CHECK(d["fp8"]["per_gpu"].size() == 2);
  CHECK_FALSE(d.contains("tf32"));
  // The power cap alone is shown, not held against the GPU.
  CHECK_THAT(warnings(r), Catch::Contains("GPU0 (NVIDIA H100 80GB HBM3): at its software power cap"));
}

TEST_CASE("gemm verdict: a GPU under its floor fails naming the GPU, the figure and the floor", "[gemm]") {
  auto r = kiln::gpucheck::gemm_verdict(
      {type_run(GemmDtype::kBf16, {gpu(0, "NVIDIA H200", {760, 755, 750}),
                                   gpu(3, "NVIDIA H200", {600, 610, 590}, kSwPowerCap)})},
      {std::nullopt, 0.7}, 20);
  CHECK(r.status == CheckStatus::kFail);
  CHECK(r.value == 600.0);
  CHECK(r.details["reason"] ==
        "GPU3 (NVIDIA H200): BF16 GEMM median 600.0 TFLOPS, under the floor 692.6 TFLOPS (0.7 x spec 989.4); at its "
        "software power cap during the run");
  CHECK(r.details["reasons"].size() == 1);  // GPU0 is fine
}

TEST_CASE("gemm verdict: the larger of the absolute and the fractional floor applies", "[gemm]") {
  SECTION("absolute above the fraction") {
    auto r = kiln::gpucheck::gemm_verdict({type_run(GemmDtype::kBf16, {gpu(0, "NVIDIA H100 80GB HBM3", {700})})},
                                          {710.0, 0.7}, 20);
    CHECK(r.threshold["min"] == 710.0);
    CHECK(r.status == CheckStatus::kFail);
    CHECK_THAT(reasons(r), Catch::Contains("under the floor 710.0 TFLOPS\""));
  }
  SECTION("the floors are BF16 only: FP8 is reported with its fraction of spec, not gated") {
    auto r = kiln::gpucheck::gemm_verdict({type_run(GemmDtype::kBf16, {gpu(0, "NVIDIA H100 80GB HBM3", {800})}),
                                           type_run(GemmDtype::kFp8, {gpu(0, "NVIDIA H100 80GB HBM3", {1247})})},
                                          {710.0, 0.7}, 20);
    CHECK(r.details["fp8"]["threshold"].is_null());
    CHECK(r.details["fp8"]["per_gpu"][0]["fraction_of_spec"].get<double>() == Approx(1247 / 1978.9));
    CHECK(r.status == CheckStatus::kPass);
  }
  SECTION("no floor given: recorded, passes") {
    auto r = kiln::gpucheck::gemm_verdict({type_run(GemmDtype::kBf16, {gpu(0, "NVIDIA H100 80GB HBM3", {100})})}, {},
                                          20);
    CHECK(r.status == CheckStatus::kPass);
    CHECK(r.threshold.is_null());
    CHECK(r.value == 100.0);
  }
}

TEST_CASE("gemm verdict: a model without a spec gets no fractional floor, and says so", "[gemm]") {
  auto r = kiln::gpucheck::gemm_verdict({type_run(GemmDtype::kBf16, {gpu(0, "NVIDIA B200", {1500})})},
                                        {std::nullopt, 0.7}, 20);
  CHECK(r.status == CheckStatus::kPass);
  CHECK(r.threshold.is_null());
  CHECK(r.details["spec_tflops"].is_null());
  CHECK(r.details["per_gpu"][0]["fraction_of_spec"].is_null());
  CHECK_THAT(warnings(r), Catch::Contains("no BF16 spec known for this model"));
}

TEST_CASE("gemm verdict: throttling by a fault or a limit fails, whatever the figure", "[gemm]") {
  auto r = kiln::gpucheck::gemm_verdict(
      {type_run(GemmDtype::kBf16, {gpu(0, "NVIDIA H100 80GB HBM3", {800}, kPowerBrake | kSwPowerCap),
                                   gpu(1, "NVIDIA H100 80GB HBM3", {800}, kHwSlowdown)})},
      {std::nullopt, 0.7}, 20);
  CHECK(r.status == CheckStatus::kFail);
  CHECK_THAT(reasons(r), Catch::Contains("GPU0 (NVIDIA H100 80GB HBM3): clocks held down during the BF16 GEMM "
                                         "(hw_power_brake_slowdown)"));
  CHECK_THAT(reasons(r), Catch::Contains("GPU1 (NVIDIA H100 80GB HBM3): clocks held down during the BF16 GEMM "
                                         "(hw_slowdown)"));
  CHECK(r.details["per_gpu"][0]["throttle_reasons"] == json{"sw_power_cap", "hw_power_brake_slowdown"});
}

TEST_CASE("gemm verdict: a GPU that measured nothing fails, the others still report", "[gemm]") {
  GemmGpuRun broken = gpu(1, "NVIDIA H100 80GB HBM3", {});
  broken.error = "wrong GEMM result at D[0,0] (16384x16384x8192): got nan, expected 31.2";
  auto r = kiln::gpucheck::gemm_verdict(
      {type_run(GemmDtype::kBf16, {gpu(0, "NVIDIA H100 80GB HBM3", {760}), broken})}, {}, 20);
  CHECK(r.status == CheckStatus::kFail);
  CHECK(r.value == 760.0);
  CHECK(r.details["per_gpu"][1]["error"] == broken.error);
  CHECK(r.details["reason"] == "GPU1 (NVIDIA H100 80GB HBM3): BF16 GEMM: " + broken.error);
  SECTION("no timed sample at all") {
    auto none = kiln::gpucheck::gemm_verdict({type_run(GemmDtype::kBf16, {gpu(0, "NVIDIA H200", {})})}, {}, 20);
    CHECK(none.status == CheckStatus::kFail);
    CHECK(none.value.is_null());
    CHECK(none.details["node_tflops"].is_null());
    CHECK(none.details["reason"] == "GPU0 (NVIDIA H200): BF16 GEMM: no timed sample");
  }
}

TEST_CASE("gemm verdict: no NVML samples is a warning, reasons unknown (null), never a pass on them", "[gemm]") {
  GemmGpuRun g = gpu(0, "NVIDIA H100 80GB HBM3", {760});
  g.nvml_sampled = false;
  g.sm_clock_mhz.clear();
  g.power_w.clear();
  g.throttle_mask = kPowerBrake;  // not trusted without nvml_sampled
  auto r = kiln::gpucheck::gemm_verdict({type_run(GemmDtype::kBf16, {g})}, {}, 20);
  CHECK(r.status == CheckStatus::kPass);
  CHECK(r.details["per_gpu"][0]["throttle_reasons"].is_null());
  CHECK(r.details["per_gpu"][0]["sm_clock_mhz_median"].is_null());
  CHECK_THAT(warnings(r), Catch::Contains("no NVML samples"));
}

TEST_CASE("gemm verdict: BF16 missing fails, skipped types are listed", "[gemm]") {
  auto none = kiln::gpucheck::gemm_verdict({}, {}, 20);
  CHECK(none.status == CheckStatus::kFail);
  CHECK(none.details["reason"] == "BF16 GEMM was not run");
  auto r = kiln::gpucheck::gemm_verdict({type_run(GemmDtype::kBf16, {gpu(0, "NVIDIA A100-SXM4-80GB", {290})})},
                                        {std::nullopt, 0.7}, 3,
                                        {{"fp8", "GPU0 (compute capability 8.0) has no fp8 tensor cores"}});
  CHECK(r.status == CheckStatus::kPass);
  CHECK(r.threshold["min"].get<double>() == Approx(0.7 * 312));
  CHECK_FALSE(r.details.contains("fp8"));
  CHECK(r.details["skipped_types"]["fp8"] == "GPU0 (compute capability 8.0) has no fp8 tensor cores");
}
