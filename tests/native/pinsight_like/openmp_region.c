/*
 * A plain OpenMP kernel for the test against the real libpinsight.so
 * (tests/integration/test_coexistence.py, run only when PINSIGHT_LIB is set). PInsight
 * traces OpenMP through OMPT, which GCC's libgomp lacks: this file is built
 * with clang -fopenmp against LLVM's libomp, the runtime libpinsight.so links.
 */
#include <omp.h>

double openmp_region(int n) {
  double sum = 0.0;
#pragma omp parallel for reduction(+ : sum)
  for (int i = 0; i < n; i++) sum += (double)i * 0.5;
  return sum;
}
