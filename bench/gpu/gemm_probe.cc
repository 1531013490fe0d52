// kiln-gemm-probe: cuBLASLt's own best dense GEMM on one GPU, the yardstick
// for kiln-gpucheck's gemm check (docs/validation.md, "gemm": the check must
// reach 0.95x of it). Same code path as the check (agent/gpucheck/lt_matmul:
// TN layout, FP32 accumulate, random inputs, FP8 unit scales, fast
// accumulation off), but a far wider search:
//
//   1. screen: for each type and each of kShapes (squares 4096..32768 and
//      rectangles), up to --algos of the algorithms cuBLASLt's heuristic
//      proposes, each timed briefly (~20 ms after a warm-up GEMM);
//   2. final: the --final-top fastest of the screen per type, each run for
//      --warm-s untimed then --final-s in ~100 ms event-timed windows, the
//      way the check times (median of the windows), and verified against a
//      host dot product. The best verified median is the probe's answer.
//
// A time budget (--budget-s, default 140) bounds the whole run: 70% for the
// screens (split evenly between the types), the rest for the finals; a shape
// the budget does not reach is printed as skipped, never silently left out.
//
// Output: one JSON object per line on stdout ({"probe": "screen" | "final" |
// "best" | "skipped" | "summary", ...}); the last line is the summary with
// the best per type. Exit 0 when it measured, 1 when there is no GPU or
// nothing ran, 2 on a usage error.
//
//   kiln-gemm-probe [--device N] [--dtypes bf16,fp8] [--budget-s S] [--algos N]
//                   [--final-top K] [--final-s S] [--warm-s S]
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/gpucheck/cuda_device.h"
#include "agent/gpucheck/gemm_math.h"
#include "agent/gpucheck/lt_matmul.h"

namespace {

using kiln::gpucheck::GemmDtype;
using kiln::gpucheck::GemmShape;
using kiln::gpucheck::LtAlgo;
using kiln::gpucheck::LtMatmul;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// The check's own candidates first (so the comparison always covers them),
// then squares and rectangles around them.
const std::vector<GemmShape> kShapes = {
    {8192, 8192, 8192},    {12288, 12288, 12288}, {16384, 16384, 8192},  {16384, 16384, 16384},
    {4096, 4096, 4096},    {6144, 6144, 6144},    {10240, 10240, 10240}, {8192, 8192, 16384},
    {16384, 8192, 16384},  {20480, 20480, 20480}, {24576, 24576, 24576}, {32768, 8192, 8192},
    {8192, 32768, 8192},   {32768, 32768, 8192},  {32768, 32768, 32768}};

struct Options {
  int device = 0;
  std::vector<GemmDtype> dtypes = {GemmDtype::kBf16, GemmDtype::kFp8};
  double budget_s = 140;
  int algos = 64;
  int final_top = 6;
  double final_s = 1.0;
  double warm_s = 0.5;
};

struct Candidate {
  GemmShape shape;
  LtAlgo algo;
  double tflops = 0;
  double ms = 0;
};

constexpr std::size_t kWorkspace = 64u << 20;

json shape_json(const GemmShape& s) { return {{"m", s.m}, {"n", s.n}, {"k", s.k}}; }

void emit(const json& j) { std::cout << j.dump() << '\n' << std::flush; }

bool parse_number(const std::string& s, double lo, double hi, double& out) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v >= lo && v <= hi)) return false;
  out = v;
  return true;
}

std::string parse(const std::vector<std::string>& args, Options& o) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& f = args[i];
    if (i + 1 >= args.size()) return f + " needs a value";
    const std::string& v = args[++i];
    double x = 0;
    if (f == "--device") {
      if (!parse_number(v, 0, 1023, x)) return "--device must be 0..1023";
      o.device = static_cast<int>(x);
    } else if (f == "--dtypes") {
      o.dtypes.clear();
      std::stringstream ss(v);
      std::string name;
      while (std::getline(ss, name, ',')) {
        auto t = kiln::gpucheck::parse_gemm_dtype(name);
        if (!t) return "--dtypes: unknown type '" + name + "' (bf16, fp8, tf32)";
        o.dtypes.push_back(*t);
      }
      if (o.dtypes.empty()) return "--dtypes is empty";
    } else if (f == "--budget-s") {
      if (!parse_number(v, 10, 3600, o.budget_s)) return "--budget-s must be 10..3600";
    } else if (f == "--algos") {
      if (!parse_number(v, 1, 256, x)) return "--algos must be 1..256";
      o.algos = static_cast<int>(x);
    } else if (f == "--final-top") {
      if (!parse_number(v, 1, 64, x)) return "--final-top must be 1..64";
      o.final_top = static_cast<int>(x);
    } else if (f == "--final-s") {
      if (!parse_number(v, 0.1, 60, o.final_s)) return "--final-s must be 0.1..60";
    } else if (f == "--warm-s") {
      if (!parse_number(v, 0, 60, o.warm_s)) return "--warm-s must be 0..60";
    } else {
      return "unknown flag " + f;
    }
  }
  return "";
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Phase 1 for one type: every shape the budget reaches, every algorithm.
std::vector<Candidate> screen(const Options& o, GemmDtype t, double budget_s) {
  std::vector<Candidate> out;
  const auto t0 = Clock::now();
  const char* type = kiln::gpucheck::gemm_dtype_name(t);
  for (const GemmShape& s : kShapes) {
    if (since(t0) > budget_s) {
      emit({{"probe", "skipped"}, {"dtype", type}, {"shape", shape_json(s)}, {"why", "screen time budget spent"}});
      continue;
    }
    auto g = LtMatmul::create(o.device, t, {s}, kWorkspace);
    if (!g) {
      emit({{"probe", "screen"}, {"dtype", type}, {"shape", shape_json(s)}, {"error", g.error().message}});
      continue;
    }
    auto algos = (*g)->set_shape(s) ? (*g)->heuristics(o.algos)
                                    : kiln::Result<std::vector<LtAlgo>>(kiln::Error(kiln::Code::kInternal, "set_shape"));
    if (!algos) {
      emit({{"probe", "screen"}, {"dtype", type}, {"shape", shape_json(s)}, {"error", algos.error().message}});
      continue;
    }
    for (const LtAlgo& a : *algos) {
      if (since(t0) > budget_s) {
        emit({{"probe", "skipped"}, {"dtype", type}, {"shape", shape_json(s)}, {"rank", a.rank},
              {"why", "screen time budget spent"}});
        break;
      }
      double ms = 0;
      auto tf = (*g)->time(a, 1, 20, 2, ms);
      json line = {{"probe", "screen"}, {"dtype", type}, {"shape", shape_json(s)}, {"algo", LtMatmul::describe(a)}};
      if (!tf) {
        line["error"] = tf.error().message;
      } else {
        line["tflops"] = *tf;
        line["ms"] = ms;
        out.push_back({s, a, *tf, ms});
      }
      emit(line);
    }
  }
  return out;
}

// Phase 2 for one type: the fastest screened candidates, timed as the check
// times and verified. Returns the best verified line, or null.
json finals(const Options& o, GemmDtype t, std::vector<Candidate> cands) {
  const char* type = kiln::gpucheck::gemm_dtype_name(t);
  std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) { return a.tflops > b.tflops; });
  if (static_cast<int>(cands.size()) > o.final_top) cands.resize(static_cast<std::size_t>(o.final_top));
  json best;
  for (const Candidate& c : cands) {
    json line = {{"probe", "final"}, {"dtype", type}, {"shape", shape_json(c.shape)},
                 {"algo", LtMatmul::describe(c.algo)}, {"screen_tflops", c.tflops}};
    auto g = LtMatmul::create(o.device, t, {c.shape}, kWorkspace);
    if (!g || !(*g)->set_shape(c.shape)) {
      line["error"] = g ? "set_shape failed" : g.error().message;
      emit(line);
      continue;
    }
    const int per_window = std::max(1, static_cast<int>(100.0 / std::max(c.ms, 1e-3) + 0.5));
    if (o.warm_s > 0) (void)(*g)->run_windows(c.algo, per_window, std::chrono::duration<double>(o.warm_s));
    auto w = (*g)->run_windows(c.algo, per_window, std::chrono::duration<double>(o.final_s));
    if (!w) {
      line["error"] = w.error().message;
      emit(line);
      continue;
    }
    if (auto st = (*g)->verify(c.algo, true); !st) {
      line["error"] = st.error().message;
      emit(line);
      continue;
    }
    line["tflops_median"] = *kiln::gpucheck::median_of(*w);
    line["tflops_max"] = *std::max_element(w->begin(), w->end());
    line["windows"] = w->size();
    line["verified"] = true;
    emit(line);
    if (best.is_null() || line["tflops_median"].get<double>() > best["tflops_median"].get<double>()) best = line;
  }
  if (!best.is_null()) {
    json b = best;
    b["probe"] = "best";
    emit(b);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (std::string err = parse({argv + 1, argv + argc}, o); !err.empty()) {
    std::cerr << "kiln-gemm-probe: " << err << '\n'
              << "usage: kiln-gemm-probe [--device N] [--dtypes bf16,fp8,tf32] [--budget-s S] [--algos N]\n"
                 "                       [--final-top K] [--final-s S] [--warm-s S]\n";
    return 2;
  }
  setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
  const auto found = kiln::gpucheck::cuda_device_count();
  if (found.count <= o.device) {
    emit({{"probe", "summary"}, {"error", "no CUDA device " + std::to_string(o.device) +
                                              (found.error.empty() ? "" : ": " + found.error)}});
    return 1;
  }
  const auto info = kiln::gpucheck::device_info(o.device);
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, o.device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, o.device);
  const auto t0 = Clock::now();
  std::vector<GemmDtype> types;
  for (GemmDtype t : o.dtypes)
    if (kiln::gpucheck::gemm_dtype_supported(t, major, minor)) types.push_back(t);
    else emit({{"probe", "skipped"}, {"dtype", kiln::gpucheck::gemm_dtype_name(t)}, {"why", "no tensor cores for it"}});
  json best = json::object();
  const double screen_each = types.empty() ? 0 : 0.7 * o.budget_s / static_cast<double>(types.size());
  for (GemmDtype t : types) {
    json b = finals(o, t, screen(o, t, screen_each));
    const char* type = kiln::gpucheck::gemm_dtype_name(t);
    best[type] = b.is_null() ? json() : json{{"tflops", b["tflops_median"]}, {"shape", b["shape"]}, {"algo", b["algo"]},
                                              {"spec_tflops", kiln::gpucheck::gemm_spec_tflops(info.name, t)
                                                                  ? json(*kiln::gpucheck::gemm_spec_tflops(info.name, t))
                                                                  : json()}};
  }
  emit({{"probe", "summary"}, {"device", o.device}, {"name", info.name}, {"pci_bus_id", info.pci_bus_id},
        {"best", best}, {"elapsed_s", since(t0)}});
  bool any = false;
  for (const auto& [k, v] : best.items()) any |= !v.is_null();
  return any ? 0 : 1;
}
