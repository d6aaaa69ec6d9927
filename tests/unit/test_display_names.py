"""How text tables name native regions (reading/native.py's display_name): demangled
C++ kernels by their qualified name alone, with names PyTorch 2.11's kernels had on an
H200; any other name as it is, cut past the table's width. The JSON keeps whole names
(tests/integration/test_cuda.py)."""

from __future__ import annotations

import pytest

from pinsight_python.reading.native import display_name

REDUCE = ("void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, "
          "at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::"
          "operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, "
          "4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::"
          "sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, "
          "float)#1}>, unsigned int, float, 4, 4>)")


@pytest.mark.parametrize("name, shown", [
    (REDUCE, "at::native::reduce_kernel"),
    ("void sgemm_largek_lds64<true, false, 5, 5, 4, 4, 4, 34>(float*, float const*, int*)",
     "sgemm_largek_lds64"),
    ("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel"
     "<float, 4>(long, at::PhiloxCudaState)",
     "at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel"),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_nn_align1>"
     "(cutlass_80_simt_sgemm_64x64_8x5_nn_align1::Params)", "cutlass::Kernel2"),
    ("void Outer<(anonymous namespace)::X>::inner<int>(int) const", "Outer::inner"),
    ("scale(float*)", "scale"),
    ("saxpy", "saxpy"),  # an extern "C" kernel: never mangled
    ("void broken<int(float*)", "void broken<int(float*)"),  # does not parse: as it is
])
def test_demangled_kernels_by_their_qualified_name(name: str, shown: str) -> None:
    assert display_name(name, demangled=True) == shown


def test_other_names_as_they_are_but_cut() -> None:
    assert display_name("step(3)") == "step(3)"  # a provider's region, not a C++ name
    assert display_name("MPI_Allreduce") == "MPI_Allreduce"
    cublas = ("sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_"
              "aligna4_alignc4_execute_kernel__5x_cublas")
    shown = display_name(cublas, demangled=True)
    assert len(shown) == 100 and shown.endswith("\u2026") and cublas.startswith(shown[:-1])
