// EMBER_VECTOR_CLONES: a hot loop compiled twice, for AVX2 machines and for the x86-64
// baseline the library is built for, the copy picked when the library loads (an ifunc).
// Not under the sanitizers, whose runtimes are not ready when ifunc resolvers run, and
// only with GCC, whose target_clones the build relies on.
// EMBER_FMA_CLONES adds a third copy for x86-64-v3 (AVX2 with fused multiply-add), for a
// loop whose rounding may differ from machine to machine (it is compiled with
// fp-contract=fast; see exp_shifted_sum_fma in cpu_softmax.cpp).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define EMBER_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#define EMBER_FMA_CLONES __attribute__((target_clones("arch=x86-64-v3", "avx2", "default")))
#else
#define EMBER_VECTOR_CLONES
#define EMBER_FMA_CLONES
#endif
