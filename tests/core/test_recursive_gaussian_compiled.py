"""The recursive Gaussian's compiled loops carry every recursion state (the interpreter cannot show this).

With y[-2] <- y[-1] written as a plain assignment, two states that start as one tensor are carried as one by the
compiler: on the H200 that gave values 100x too large while the interpreter's results were exact. Three
recursions x (y[-1], y[-2]) = 6 states per loop; the tile loops also carry the next tile's input sums.
"""

from __future__ import annotations

from _offline_compile import carried_per_loop

_H_SIG = {"A": "*fp32", "B": "*fp32", "OUT": "*fp32", "COEF": "*fp32", "rows": "i32", "width": "i32",
          "height": "i32", "head_end": "i32", "blocks_end": "i32", "fast_start": "i32", "fast_end": "i32",
          "map_stride": "i32", "RADIUS": "constexpr", "MODE": "constexpr", "MAPS": "constexpr", "B_BCAST": "constexpr",
          "BLOCK_R": "constexpr", "BLOCK_W": "constexpr"}


def test_horizontal_loops_carry_all_six_states():
    consts = {"RADIUS": 5, "MODE": 1, "MAPS": 3, "B_BCAST": False, "BLOCK_R": 16, "BLOCK_W": 16}
    carried = carried_per_loop("fusedsim.core.recursive_gaussian.kernel:_iir_h_tiles_kernel", _H_SIG, consts,
                               num_warps=1, enable_fp_fusion=False)
    assert carried == [6, 7, 7, 7]  # the head's steps left of the image, then the three tile loops (+ sums)


def test_vertical_loop_carries_all_six_states_and_the_prefetched_rows():
    sig = {"X": "*fp32", "OUT": "*fp32", "COEF": "*fp32", "height": "i32", "width": "i32",
           "RADIUS": "constexpr", "BLOCK_C": "constexpr"}
    carried = carried_per_loop("fusedsim.core.recursive_gaussian.kernel:_iir_vertical_kernel", sig,
                               {"RADIUS": 5, "BLOCK_C": 32}, num_warps=1, enable_fp_fusion=False)
    assert carried == [10]  # 6 states + 4 rows loaded four steps ahead


_ERROR_SIG = {"T": "*fp32", "X1": "*fp32", "X2": "*fp32", "MU1": "*fp32", "S11": "*fp32", "PART": "*fp64",
              "COEF": "*fp32", "height": "i32", "width": "i32", "map_stride": "i32", "col_blocks": "i32",
              "RADIUS": "constexpr", "REF_BCAST": "constexpr", "FUSED_REF": "constexpr", "BLOCK_C": "constexpr"}


def test_ssimulacra2_comparison_loop_carries_every_map_state():
    consts = {"RADIUS": 5, "REF_BCAST": False, "BLOCK_C": 32}
    for fused, maps in ((False, 3), (True, 5)):
        carried = carried_per_loop("fusedsim.families.ssimulacra2.kernel:_error_kernel", _ERROR_SIG,
                                   {**consts, "FUSED_REF": fused}, num_warps=1, enable_fp_fusion=False)
        # per map 6 recursion states and 4 rows loaded ahead, plus the 6 pooled sums
        assert carried == [maps * (6 + 4) + 6], (fused, carried)
