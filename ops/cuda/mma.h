#pragma once
// Where each lane of a warp holds its elements for the tensor-core instruction
//   mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32   D (16 x 8) = A (16 x 16) B (16 x 8) + C
// and the index math of the 16-bit attention kernel built on it (ops/cuda/attention_mma.cu). Plain functions
// of (lane, element), usable on the host as well as on the device, so that a CPU test
// (tests/test_mma_fragments.cpp) checks the kernel's addressing against an emulated warp without a GPU.
//
// Source: PTX ISA, section 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16 with floating point type". With
// g = lane / 4 (the group) and t = lane % 4 (the thread in the group):
//   A, elements a0..a7 in four 32-bit registers (register r holds a_{2r} in its low half, a_{2r+1} high):
//     row g for a0, a1, a4, a5 and g + 8 for a2, a3, a6, a7; column 2t + (i & 1), plus 8 for i >= 4.
//   B, elements b0..b3 in two registers:  row (the k index) 2t + (i & 1), plus 8 for i >= 2; column g.
//   C and D, elements c0..c3 (float32):   row g, plus 8 for i >= 2; column 2t + (i & 1).
// So every register's two elements are neighbours along k (A, B) and the accumulators of one row sit in one
// group of four lanes: the softmax statistics of a row are reduced with two shuffles (xor 1, xor 2).
#ifdef __CUDACC__
#define SACCADE_MMA_HD __host__ __device__ inline constexpr
#else
#define SACCADE_MMA_HD inline constexpr
#endif

namespace saccade::cuda::mma {

/// A (row, column) of a tile.
struct Coord {
  int row, col;
};

constexpr int kM = 16, kN = 8, kK = 16;  // the instruction's shape
constexpr int kWarp = 32;

/// Element i (0..7) of lane's A fragment: its place in the 16 x 16 A tile.
SACCADE_MMA_HD Coord a_coord(int lane, int i) {
  return {(lane >> 2) + ((i & 2) ? 8 : 0), 2 * (lane & 3) + (i & 1) + ((i & 4) ? 8 : 0)};
}
/// Element i (0..3) of lane's B fragment: its place (k, n) in the 16 x 8 B tile.
SACCADE_MMA_HD Coord b_coord(int lane, int i) {
  return {2 * (lane & 3) + (i & 1) + ((i & 2) ? 8 : 0), lane >> 2};
}
/// Element i (0..3) of lane's C / D fragment (float32 accumulators): its place in the 16 x 8 tile.
SACCADE_MMA_HD Coord c_coord(int lane, int i) {
  return {(lane >> 2) + ((i & 2) ? 8 : 0), 2 * (lane & 3) + (i & 1)};
}

// ---- the attention kernel's index math (ops/cuda/attention_mma.cu) ----
// One warp owns 16 query rows. Per 64-key tile: S (16 x 64) = Q (16 x D) Kᵀ in D/16 k-steps x 8 key tiles of
// 8, then O (16 x D) += P (16 x 64) V (64 x D) in 4 k-steps of 16 keys x D/8 column tiles.

/// S = Q Kᵀ, B operand of k-step ks and key tile nt: element i of lane is Kᵀ[d][key] = K[key][d]; returns
/// (key, d) within the block's key tile and head dim. Elements 0, 1 (and 2, 3) are neighbours along d, so one
/// 32-bit load of row-major K reads a register.
SACCADE_MMA_HD Coord kt_source(int lane, int i, int nt, int ks) {
  const Coord b = b_coord(lane, i);
  return {kN * nt + b.col, kK * ks + b.row};
}

/// P as an A operand without leaving registers (FlashAttention-2's reuse of the accumulators): the S
/// accumulators of key tiles 2kk and 2kk + 1 are exactly the A fragment of k-step kk of P V. Element pair
/// (e, e + 1), e in {0, 2}, of S tile nt goes to this register of k-step nt / 2.
SACCADE_MMA_HD int p_register(int nt, int e) { return 2 * (nt & 1) + (e >> 1); }

/// O += P V, B operand of k-step kk and column tile nd: element i of lane is V[key][d]; returns (key, d).
/// Elements 0, 1 are neighbours along the key, so a register takes two 16-bit loads (V is row-major).
SACCADE_MMA_HD Coord v_source(int lane, int i, int nd, int kk) {
  const Coord b = b_coord(lane, i);
  return {kK * kk + b.row, kN * nd + b.col};
}

/// Accumulator element i of S key tile nt (or of O column tile nt): (row within the warp's 16, column within
/// the 64-key tile or the head dim).
SACCADE_MMA_HD Coord acc_coord(int lane, int i, int nt) {
  const Coord c = c_coord(lane, i);
  return {c.row, kN * nt + c.col};
}

}  // namespace saccade::cuda::mma
