/*
 * EC_AVX2_CLONES before a function's definition: where the compiler makes
 * clones chosen when the program loads, the function gets an AVX2 clone
 * beside the baseline, so its element-wise passes take four doubles at a
 * time instead of two. Used on code whose clones give the same bits (no
 * reordered sums: no -ffast-math, and AVX2 alone enables no FMA).
 *
 * GCC on x86-64 alone: Clang 14 accepts the attribute, but a program linked
 * from the fuzz build's archive (clang, -fsanitize=fuzzer) does not find
 * the dispatched symbol. The test build (ECOPT_TEST_HOOKS) has the
 * baseline alone, and test_proc's test_step_clones_agree compares its rows
 * with the shipped build's.
 */
#ifndef ECOPT_CLONES_H
#define ECOPT_CLONES_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    defined(__has_attribute) && !defined(ECOPT_TEST_HOOKS)
#if __has_attribute(target_clones)
#define EC_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef EC_AVX2_CLONES
#define EC_AVX2_CLONES
#endif

#endif
