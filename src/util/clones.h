/* clones.h: DT_CLONES before a hot loop's function definition compiles it for AVX-512
 * (x86-64-v4), AVX2 (v3) and the baseline; the dynamic loader picks one at start (GCC's
 * target_clones; configure checks the compiler can). Loops vectorise for the machine the program
 * runs on, not the one it was built on: one binary for a cluster's login and compute nodes. */
#ifndef DT_UTIL_CLONES_H
#define DT_UTIL_CLONES_H

#ifdef HAVE_TARGET_CLONES
#define DT_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DT_CLONES
#endif

#endif
