#pragma once
// Where each lane of a warp holds its elements for the tensor-core instruction
//   mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32   D (16 x 8) = A (16 x 16) B (16 x 8) + C
// and the index math of the 16-bit attention kernels built on it (ops/cuda/attention_mma.cu). Plain functions
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

// ---- reading operands from row-major shared tiles, as the attention kernels do (attention_mma.cu) ----
// Three access patterns serve every product of FlashAttention-2's forward and backward:
//   a_source     A from a row-major (16, K) tile: Q in S = Q Kᵀ; K, V in Sᵀ = K Qᵀ, dPᵀ = V dOᵀ; dS in dQ =
//   dS K.
//                A register's two elements are neighbours along a row: one 32-bit load.
//   b_source_nk  B from a row-major (N, K) tile, i.e. Bᵀ stored: K in S = Q Kᵀ; Q and dO in Sᵀ = K Qᵀ and
//                dPᵀ = V dOᵀ. A register's two elements are neighbours along a row: one 32-bit load.
//   b_source_kn  B from a row-major (K, N) tile: V in O = P V; dO, Q in dV = Pᵀ dO, dK = dSᵀ Q; K in dQ = dS
//   K.
//                A register's two elements sit in two rows: two 16-bit loads.
// And one that keeps a product in registers: the accumulators of C tiles 2kk and 2kk + 1 (16 x 8 each) are
// exactly the A fragment of k-step kk of the next product (FlashAttention-2's P V, and dV, dK in the
// backward).

/// A element i of lane, k-step ks, from a row-major (16, K) tile: (row, column) in the tile.
SACCADE_MMA_HD Coord a_source(int lane, int i, int ks) {
  const Coord a = a_coord(lane, i);
  return {a.row, kK * ks + a.col};
}

/// B element i of lane, for the 8-column tile nt and k-step ks, from a row-major (N, K) tile (Bᵀ stored):
/// (row = n, column = k) in the tile.
SACCADE_MMA_HD Coord b_source_nk(int lane, int i, int nt, int ks) {
  const Coord b = b_coord(lane, i);
  return {kN * nt + b.col, kK * ks + b.row};
}

/// B element i of lane, for the 8-column tile nd and k-step kk, from a row-major (K, N) tile: (row = k,
/// column = n) in the tile.
SACCADE_MMA_HD Coord b_source_kn(int lane, int i, int nd, int kk) {
  const Coord b = b_coord(lane, i);
  return {kK * kk + b.row, kN * nd + b.col};
}

/// Accumulators to A: element pair (e, e + 1), e in {0, 2}, of C tile nt goes to this A register of k-step
/// nt / 2 (elements 2 r, 2 r + 1 of the A fragment).
SACCADE_MMA_HD int p_register(int nt, int e) { return 2 * (nt & 1) + (e >> 1); }

/// Accumulator element i of the 8-column C tile nt: (row within the 16, column 8 nt + ...).
SACCADE_MMA_HD Coord acc_coord(int lane, int i, int nt) {
  const Coord c = c_coord(lane, i);
  return {c.row, kN * nt + c.col};
}

// ---- ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{,.trans}.shared.b16 (PTX ISA 9.7.9.23 "ldmatrix") ----
// One instruction loads 1, 2 or 4 matrices of 8 x 8 16-bit elements from shared memory, each row 16
// contiguous bytes at an address one lane supplies: lanes 8 m .. 8 m + 7 give rows 0..7 of matrix m (x1 reads
// lanes 0-7, x2 lanes 0-15). Every lane receives one 32-bit register per matrix. Without .trans, register m
// of lane holds matrix m's row lane / 4, columns 2 (lane % 4) and + 1 (low, high half); with .trans, column
// lane / 4, rows 2 (lane % 4) and + 1 (the transposed matrix's row). The three functions below name, for the
// kernel's x4 loads, the (row, column) of the tile where lane's row address points; the registers then come
// out as the fragments of a_coord / b_coord (tests/test_mma_fragments.cpp checks this against the scalar
// loads above).

/// The matrix (0..3) whose row address lane supplies to ldmatrix.
SACCADE_MMA_HD int ldmatrix_matrix(int lane) { return lane >> 3; }
/// The row (0..7) of that matrix.
SACCADE_MMA_HD int ldmatrix_row(int lane) { return lane & 7; }
/// Where the element in half h (0: low 16 bits, 1: high) of each of lane's registers sits in its 8 x 8
/// matrix, without (trans = false) or with .trans.
SACCADE_MMA_HD Coord ldmatrix_element(int lane, int h, bool trans) {
  const Coord c{lane >> 2, 2 * (lane & 3) + h};
  return trans ? Coord{c.col, c.row} : c;
}

/// ldmatrix.x4 (no .trans) of the A fragment of k-step ks from a row-major (16, K) tile: lane's row address
/// (row, column of the first of 8 elements). Registers 0..3 = a_coord's registers 0..3 (matrices: rows 0-7 /
/// 8-15 times columns 0-7 / 8-15 of the k-step).
SACCADE_MMA_HD Coord a_ldmatrix(int lane, int ks) { return {lane & 15, kK * ks + 8 * (lane >> 4)}; }

/// ldmatrix.x4 (no .trans) of the B fragments of the 8-column tiles nt and nt + 1, k-step ks, from a
/// row-major (N, K) tile (Bᵀ stored, as K in S = Q Kᵀ): lane's row address (row = n, column = k). Registers
/// 0, 1 = tile nt's b registers 0, 1; registers 2, 3 = tile nt + 1's.
SACCADE_MMA_HD Coord b_nk_ldmatrix(int lane, int nt, int ks) {
  return {kN * (nt + (lane >> 4)) + (lane & 7), kK * ks + 8 * ((lane >> 3) & 1)};
}

/// ldmatrix.x4.trans of the B fragments of the 8-column tiles nd and nd + 1, k-step kk, from a row-major (K,
/// N) tile (as V in O = P V): lane's row address (row = k, column = n). Registers 0, 1 = tile nd's b
/// registers 0, 1; registers 2, 3 = tile nd + 1's.
SACCADE_MMA_HD Coord b_kn_ldmatrix_trans(int lane, int nd, int kk) {
  return {kK * kk + 8 * ((lane >> 3) & 1) + (lane & 7), kN * (nd + (lane >> 4))};
}

}  // namespace saccade::cuda::mma
