#include "agent/gpucheck/cublaslt_loader.h"

#include <dlfcn.h>

#include <array>
#include <string>

#include <cublasLt.h>

// The forwarders below have the names of cuBLASLt's own functions. They are
// hidden (the file is compiled with -fvisibility=hidden, see CMakeLists.txt)
// so that the library, once opened, resolves its internal calls to itself,
// never to these.

namespace kiln::gpucheck {
namespace {

#ifndef KILN_CUBLASLT_SONAME
#error "KILN_CUBLASLT_SONAME (libcublasLt.so.<CUDA major>) comes from agent/gpucheck/CMakeLists.txt"
#endif

// Every function a forwarder below resolves: all are looked up at load, so a
// library lacking one fails load_cublaslt() rather than a GEMM half-way.
constexpr std::array kFunctions = {
    "cublasLtCreate",
    "cublasLtDestroy",
    "cublasLtGetStatusString",
    "cublasLtMatmul",
    "cublasLtMatmulAlgoConfigGetAttribute",
    "cublasLtMatmulAlgoGetHeuristic",
    "cublasLtMatmulDescCreate",
    "cublasLtMatmulDescDestroy",
    "cublasLtMatmulDescSetAttribute",
    "cublasLtMatmulPreferenceCreate",
    "cublasLtMatmulPreferenceDestroy",
    "cublasLtMatmulPreferenceSetAttribute",
    "cublasLtMatrixLayoutCreate",
    "cublasLtMatrixLayoutDestroy",
};

struct Library {
  void* handle = nullptr;
  std::string error;  // empty when every function was found
};

const Library& library() {
  static const Library lib = [] {
    Library l;
    l.handle = ::dlopen(KILN_CUBLASLT_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (l.handle == nullptr) {
      const char* why = ::dlerror();
      l.error = std::string("cannot load " KILN_CUBLASLT_SONAME ": ") + (why ? why : "unknown error");
      return l;
    }
    for (const char* name : kFunctions) {
      if (::dlsym(l.handle, name) == nullptr) {
        l.error = std::string(KILN_CUBLASLT_SONAME " has no ") + name;
        ::dlclose(l.handle);
        l.handle = nullptr;
        return l;
      }
    }
    return l;
  }();
  return lib;
}

// The library's own `name`, typed as the forwarder of the same name; null
// without the library.
template <typename Fn>
Fn real(const char* name) {
  const Library& l = library();
  return l.handle != nullptr ? reinterpret_cast<Fn>(::dlsym(l.handle, name)) : nullptr;
}

}  // namespace

Status load_cublaslt() {
  const Library& l = library();
  if (l.handle == nullptr) return Error(Code::kUnavailable, l.error);
  return {};
}

}  // namespace kiln::gpucheck

using kiln::gpucheck::real;

// Calls the library's function of the forwarder's name with its arguments;
// each forwarder resolves its function once.
#define KILN_LT_FORWARD(name, ...)                                     \
  static const auto fn = real<decltype(&name)>(#name);                 \
  return fn != nullptr ? fn(__VA_ARGS__) : CUBLAS_STATUS_NOT_INITIALIZED

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) { KILN_LT_FORWARD(cublasLtCreate, handle); }

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) { KILN_LT_FORWARD(cublasLtDestroy, handle); }

const char* cublasLtGetStatusString(cublasStatus_t status) {
  static const auto fn = real<decltype(&cublasLtGetStatusString)>("cublasLtGetStatusString");
  return fn != nullptr ? fn(status) : "cuBLASLt could not be loaded";
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t a_desc, const void* b, cublasLtMatrixLayout_t b_desc,
                              const void* beta, const void* c, cublasLtMatrixLayout_t c_desc, void* d,
                              cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  KILN_LT_FORWARD(cublasLtMatmul, handle, desc, alpha, a, a_desc, b, b_desc, beta, c, c_desc, d, d_desc, algo,
                  workspace, workspace_bytes, stream);
}

cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t* algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr, void* buf,
                                                    size_t size, size_t* written) {
  KILN_LT_FORWARD(cublasLtMatmulAlgoConfigGetAttribute, algo, attr, buf, size, written);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a_desc, cublasLtMatrixLayout_t b_desc,
                                              cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  KILN_LT_FORWARD(cublasLtMatmulAlgoGetHeuristic, handle, desc, a_desc, b_desc, c_desc, d_desc, pref, requested,
                  results, returned);
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  KILN_LT_FORWARD(cublasLtMatmulDescCreate, desc, compute, scale);
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) { KILN_LT_FORWARD(cublasLtMatmulDescDestroy, desc); }

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  KILN_LT_FORWARD(cublasLtMatmulDescSetAttribute, desc, attr, buf, size);
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  KILN_LT_FORWARD(cublasLtMatmulPreferenceCreate, pref);
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  KILN_LT_FORWARD(cublasLtMatmulPreferenceDestroy, pref);
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t size) {
  KILN_LT_FORWARD(cublasLtMatmulPreferenceSetAttribute, pref, attr, buf, size);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  KILN_LT_FORWARD(cublasLtMatrixLayoutCreate, layout, type, rows, cols, ld);
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  KILN_LT_FORWARD(cublasLtMatrixLayoutDestroy, layout);
}

}  // extern "C"
