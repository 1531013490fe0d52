#pragma once
// cuBLASLt, loaded only when a GEMM is about to run.
//
// Loading libcublasLt runs its initialisers, about 0.3 s of CPU, at every
// start of a program linked against it, whatever the program then does.
// kiln-gpucheck starts for every validation and every --help, on machines
// with and without GPUs, and uses cuBLASLt only in the gemm check; so it is
// not linked against the library. cublaslt_loader.cc instead defines each
// cuBLASLt function kiln-gpucheck calls (the declarations of <cublasLt.h>,
// unchanged) as a forwarder that opens the library (dlopen of its soname,
// found the way the dynamic linker finds it) at the first call and calls the
// library's own function. Code using cuBLASLt is written as if linked to it.
//
// Errors: load_cublaslt() says why the library could not be opened or lacks
// a function; callers check it before their first cuBLASLt call. A forwarder
// called without the library returns CUBLAS_STATUS_NOT_INITIALIZED
// (cublasLtGetStatusString: "cuBLASLt could not be loaded").
//
// Threads: any; the library is opened once (a function-local static).

#include "common/result.h"

namespace kiln::gpucheck {

// Opens cuBLASLt the first time; later calls return the first answer.
// kUnavailable naming the library and dlerror()'s words when it is missing
// or lacks one of the functions used.
Status load_cublaslt();

}  // namespace kiln::gpucheck
