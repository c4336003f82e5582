// The tensor-core attention kernel's index math (ops/cuda/mma.h) on the CPU, without a GPU: the fragment
// layouts of mma.m16n8k16 each cover their tile once, and one warp's two products of the kernel
// (ops/cuda/attention_mma.cu) — S = Q Kᵀ with K read row-major, and O = P V with P taken straight from the S
// accumulators — computed by an emulated warp through exactly the kernel's addressing, equal the plain
// matrix products. The emulated instruction follows the PTX ISA's definition (the fragment layout in, the
// product, the layout out); what a GPU must still show (the instruction itself, the softmax, the masks) is in
// tests/test_cuda_attention.cpp.
#include <catch2/catch.hpp>

#include <array>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "ops/cuda/mma.h"

namespace mma = saccade::cuda::mma;

namespace {

using Frag8 = std::array<float, 8>;  // one lane's A elements a0..a7
using Frag4 = std::array<float, 4>;  // one lane's B elements b0..b3, or C elements c0..c3

// D = A B + C for one warp, by the instruction's definition: the fragments placed into their tiles with the
// PTX layouts, multiplied, and D handed back in the accumulator layout.
void emulated_mma(std::array<Frag4, 32>& c, const std::array<Frag8, 32>& a, const std::array<Frag4, 32>& b) {
  float A[16][16], B[16][8], C[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) A[mma::a_coord(lane, i).row][mma::a_coord(lane, i).col] = a[lane][i];
    for (int i = 0; i < 4; ++i) B[mma::b_coord(lane, i).row][mma::b_coord(lane, i).col] = b[lane][i];
    for (int i = 0; i < 4; ++i) C[mma::c_coord(lane, i).row][mma::c_coord(lane, i).col] = c[lane][i];
  }
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8; ++n)
      for (int k = 0; k < 16; ++k) C[r][n] += A[r][k] * B[k][n];
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) c[lane][i] = C[mma::c_coord(lane, i).row][mma::c_coord(lane, i).col];
}

template <class F>
std::set<std::pair<int, int>> cells(int elements, F coord) {
  std::set<std::pair<int, int>> s;
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < elements; ++i) s.insert({coord(lane, i).row, coord(lane, i).col});
  return s;
}

}  // namespace

TEST_CASE("mma fragments: each layout covers its tile once, register pairs are neighbours", "[mma]") {
  auto in_tile = [](const std::set<std::pair<int, int>>& s, int rows, int cols) {
    for (auto [r, c] : s)
      if (r < 0 || r >= rows || c < 0 || c >= cols) return false;
    return static_cast<int>(s.size()) == rows * cols;
  };
  CHECK(in_tile(cells(8, mma::a_coord), 16, 16));  // 256 distinct cells from 32 x 8 elements
  CHECK(in_tile(cells(4, mma::b_coord), 16, 8));
  CHECK(in_tile(cells(4, mma::c_coord), 16, 8));
  for (int lane = 0; lane < 32; ++lane) {
    INFO("lane " << lane);
    for (int r = 0; r < 4; ++r) {  // a register's two halves: same row, columns c and c + 1 (one 32-bit load)
      CHECK(mma::a_coord(lane, 2 * r + 1).row == mma::a_coord(lane, 2 * r).row);
      CHECK(mma::a_coord(lane, 2 * r + 1).col == mma::a_coord(lane, 2 * r).col + 1);
    }
    for (int nt = 0; nt < 8; ++nt)
      for (int ks = 0; ks < 8; ++ks)
        for (int r = 0; r < 2; ++r) {  // Kᵀ's register: one key, head-dim d and d + 1 (one 32-bit load of K)
          const mma::Coord lo = mma::b_source_nk(lane, 2 * r, nt, ks),
                           hi = mma::b_source_nk(lane, 2 * r + 1, nt, ks);
          CHECK((hi.row == lo.row && hi.col == lo.col + 1 && lo.col % 2 == 0));
        }
    // the accumulators of S tiles 2kk, 2kk + 1 sit where P's A fragment of k-step kk needs them
    for (int nt = 0; nt < 8; ++nt)
      for (int e = 0; e < 4; ++e) {
        const mma::Coord s = mma::acc_coord(lane, e, nt);  // (row, key within the 64-key tile)
        const mma::Coord p = mma::a_coord(lane, 2 * mma::p_register(nt, e & 2) + (e & 1));
        CHECK(s.row == p.row);
        CHECK(s.col == mma::kK * (nt / 2) + p.col);
      }
  }
}

TEST_CASE("mma fragments: one warp's S = Q K^T and O = P V through the kernel's addressing", "[mma]") {
  // Kernel shapes: a warp's 16 query rows, one 64-key tile, head dim kD (rows of the shared tiles padded by
  // 8)
  for (int kD : {64, 128}) {
    INFO("kD " << kD);
    const int L = kD + 8, KS = kD / 16, NT = 8, ND = kD / 8;
    std::mt19937 rng(kD);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> qs(16 * L), ks(64 * L), vs(64 * L);  // row-major, as the kernel's shared tiles
    for (auto* t : {&qs, &ks, &vs})
      for (float& x : *t) x = u(rng);

    // S = Q Kᵀ as the kernel computes it: Q's A fragments (a_coord), Kᵀ's B fragments (kt_source)
    std::vector<std::array<Frag4, 32>> s(NT);
    for (auto& tile : s)
      for (auto& f : tile) f.fill(0);
    for (int kstep = 0; kstep < KS; ++kstep) {
      std::array<Frag8, 32> a{};
      for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < 8; ++i) {
          const mma::Coord c = mma::a_coord(lane, i);
          a[lane][i] = qs[c.row * L + mma::kK * kstep + c.col];
        }
      for (int nt = 0; nt < NT; ++nt) {
        std::array<Frag4, 32> b{};
        for (int lane = 0; lane < 32; ++lane)
          for (int i = 0; i < 4; ++i) {
            const mma::Coord src = mma::b_source_nk(lane, i, nt, kstep);
            b[lane][i] = ks[src.row * L + src.col];
          }
        emulated_mma(s[nt], a, b);
      }
    }
    std::vector<float> S(16 * 64);  // the plain product, and the emulated accumulators beside it
    for (int r = 0; r < 16; ++r)
      for (int j = 0; j < 64; ++j) {
        double x = 0;
        for (int d = 0; d < kD; ++d) x += static_cast<double>(qs[r * L + d]) * ks[j * L + d];
        S[r * 64 + j] = static_cast<float>(x);
      }
    for (int nt = 0; nt < NT; ++nt)
      for (int lane = 0; lane < 32; ++lane)
        for (int e = 0; e < 4; ++e) {
          const mma::Coord c = mma::acc_coord(lane, e, nt);
          CHECK(s[nt][lane][e] == Approx(S[c.row * 64 + c.col]).margin(1e-4));
        }

    // O = P V with P = the S accumulators re-read as A fragments (p_register), V's B fragments (v_source)
    std::vector<std::array<Frag4, 32>> o(ND);
    for (auto& tile : o)
      for (auto& f : tile) f.fill(0);
    for (int kk = 0; kk < NT / 2; ++kk) {
      std::array<Frag8, 32> pa{};
      for (int lane = 0; lane < 32; ++lane)
        for (int half = 0; half < 2; ++half)  // S tiles 2kk and 2kk + 1
          for (int e = 0; e < 4; ++e) {
            const int nt = 2 * kk + half, reg = mma::p_register(nt, e & 2);
            pa[lane][2 * reg + (e & 1)] = s[nt][lane][e];
          }
      for (int nd = 0; nd < ND; ++nd) {
        std::array<Frag4, 32> b{};
        for (int lane = 0; lane < 32; ++lane)
          for (int i = 0; i < 4; ++i) {
            const mma::Coord src = mma::b_source_kn(lane, i, nd, kk);
            b[lane][i] = vs[src.row * L + src.col];
          }
        emulated_mma(o[nd], pa, b);
      }
    }
    for (int nd = 0; nd < ND; ++nd)
      for (int lane = 0; lane < 32; ++lane)
        for (int e = 0; e < 4; ++e) {
          const mma::Coord c = mma::acc_coord(lane, e, nd);  // (row, head-dim column)
          double x = 0;
          for (int j = 0; j < 64; ++j) x += static_cast<double>(S[c.row * 64 + j]) * vs[j * L + c.col];
          CHECK(o[nd][lane][e] == Approx(x).margin(1e-3));
        }
  }
}
