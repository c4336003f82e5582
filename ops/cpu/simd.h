#pragma once
// SACCADE_VECTOR_CLONES: compile a function once per vector width (AVX-512, AVX2, baseline x86-64) and pick
// the clone at load time (GCC's target_clones, an ifunc resolver), so one build uses the widest vector unit
// of the machine it runs on without -march=native. Put it on a non-template function whose loops vectorise
// (`#pragma omp simd`); helpers it calls must be inline so they are compiled inside each clone.
// Not under ThreadSanitizer: the resolver runs before the sanitizer's runtime is up and its instrumentation
// crashes the program at load.
#if defined(__SANITIZE_THREAD__) || !defined(__x86_64__)
#define SACCADE_VECTOR_CLONES
#else
#define SACCADE_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
