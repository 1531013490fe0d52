// agent/gpucheck/cublaslt_loader: cuBLASLt's functions, called by their own
// names, reach the real library opened at the first call. Host-side calls
// (descriptors, status strings) need no GPU, so this runs on every machine
// with the CUDA toolkit.
#include <catch2/catch.hpp>

#include <string>

#include <cublasLt.h>

#include "agent/gpucheck/cublaslt_loader.h"

using kiln::gpucheck::load_cublaslt;

TEST_CASE("cuBLASLt is opened on first use and its functions answer through the forwarders", "[gpucheck]") {
  const auto loaded = load_cublaslt();
  INFO((loaded ? std::string() : loaded.error().message));
  REQUIRE(loaded);
  // The library's own words, not the forwarder's fallback.
  CHECK(std::string(cublasLtGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED)) == "the library was not initialized");

  cublasLtMatrixLayout_t layout = nullptr;
  REQUIRE(cublasLtMatrixLayoutCreate(&layout, CUDA_R_16BF, 64, 32, 64) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(layout != nullptr);
  CHECK(cublasLtMatrixLayoutDestroy(layout) == CUBLAS_STATUS_SUCCESS);

  cublasLtMatmulDesc_t desc = nullptr;
  REQUIRE(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
  const cublasOperation_t trans = CUBLAS_OP_T;
  CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof trans) ==
        CUBLAS_STATUS_SUCCESS);
  CHECK(cublasLtMatmulDescDestroy(desc) == CUBLAS_STATUS_SUCCESS);
  // A second answer is the first one: the library is opened once.
  CHECK(load_cublaslt());
}
