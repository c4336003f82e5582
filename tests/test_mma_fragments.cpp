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

namespace {

// ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{,.trans}.shared.b16 by the PTX ISA's definition (section 9.7.9.23),
// written here without ops/cuda/mma.h: lanes 8 m .. 8 m + 7 give the row addresses (tile coordinates) of
// matrix m's rows 0..7; register m of each lane gets row lane / 4, columns 2 (lane % 4), + 1 of matrix m, or
// with .trans column lane / 4, rows 2 (lane % 4), + 1. Each register as its (low, high) 16-bit elements.
using Reg = std::array<float, 2>;
std::array<std::array<Reg, 4>, 32> emulated_ldmatrix(const std::vector<float>& tile, int ld,
                                                     const std::array<mma::Coord, 32>& address, int num,
                                                     bool trans) {
  std::array<std::array<Reg, 4>, 32> regs{};
  for (int lane = 0; lane < 32; ++lane)
    for (int m = 0; m < num; ++m)
      for (int h = 0; h < 2; ++h) {
        const int row = trans ? 2 * (lane % 4) + h : lane / 4, col = trans ? lane / 4 : 2 * (lane % 4) + h;
        const mma::Coord a = address[8 * m + row];
        regs[lane][m][h] = tile[a.row * ld + a.col + col];
      }
  return regs;
}

template <class F>
std::array<mma::Coord, 32> addresses(F f) {
  std::array<mma::Coord, 32> a{};
  for (int lane = 0; lane < 32; ++lane) a[lane] = f(lane);
  return a;
}

// Whether each matrix's 8 row addresses (16 bytes each, 16-byte aligned) fall in 8 distinct groups of four
// banks, the condition for an ldmatrix phase without bank conflicts, for a 16-bit tile with row stride ld.
bool conflict_free(const std::array<mma::Coord, 32>& address, int ld) {
  for (int m = 0; m < 4; ++m) {
    std::set<int> groups;
    for (int r = 0; r < 8; ++r) {
      const int byte = 2 * (address[8 * m + r].row * ld + address[8 * m + r].col);
      if (byte % 16 != 0) return false;
      groups.insert(byte / 16 % 8);
    }
    if (groups.size() != 8) return false;
  }
  return true;
}

// A tile of distinct values (its index), rows of ld elements.
std::vector<float> numbered(int rows, int ld) {
  std::vector<float> t(static_cast<size_t>(rows) * ld);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<float>(i);
  return t;
}

}  // namespace

TEST_CASE("mma fragments: ldmatrix_element is the PTX element each lane receives", "[mma]") {
  for (bool trans : {false, true}) {
    const std::vector<float> tile = numbered(8, 8);  // one 8 x 8 matrix, rows given by lanes 0-7
    const auto regs = emulated_ldmatrix(tile, 8, addresses([](int lane) {
                                          return mma::Coord{lane & 7, 0};
                                        }),
                                        1, trans);
    std::set<std::pair<int, int>> seen;
    for (int lane = 0; lane < 32; ++lane)
      for (int h = 0; h < 2; ++h) {
        INFO("trans " << trans << " lane " << lane << " half " << h);
        const mma::Coord e = mma::ldmatrix_element(lane, h, trans);
        CHECK(regs[lane][0][h] == tile[e.row * 8 + e.col]);
        seen.insert({e.row, e.col});
      }
    CHECK(seen.size() == 64);  // every element of the matrix once
  }
  for (int lane = 0; lane < 32; ++lane) {
    CHECK(mma::ldmatrix_matrix(lane) * 8 + mma::ldmatrix_row(lane) == lane);
  }
}

TEST_CASE("mma fragments: ldmatrix x4 loads equal the kernel's scalar fragment loads", "[mma]") {
  // The forward's tiles (row stride kD + 8) and the backward's dS tile (64 keys + 8); offsets of a warp's
  // 16 rows within the tile (16 w) as the kernels add them.
  for (int ld : {64 + 8, 128 + 8}) {
    const int kD = ld - 8;
    INFO("row stride " << ld);
    const std::vector<float> tile = numbered(64, ld);
    for (int w = 0; w < 4; ++w)
      for (int ks = 0; ks < kD / 16; ++ks) {  // A from a row-major (16, K) tile: rows 16 w .., k-step ks
        INFO("warp " << w << " k-step " << ks);
        const auto addr = addresses([&](int lane) {
          const mma::Coord a = mma::a_ldmatrix(lane, ks);
          return mma::Coord{16 * w + a.row, a.col};
        });
        CHECK(conflict_free(addr, ld));
        const auto regs = emulated_ldmatrix(tile, ld, addr, 4, false);
        for (int lane = 0; lane < 32; ++lane)
          for (int i = 0; i < 8; ++i) {
            const mma::Coord s = mma::a_source(lane, i, ks);
            CHECK(regs[lane][i / 2][i % 2] == tile[(16 * w + s.row) * ld + s.col]);
          }
      }
    for (int nt = 0; nt < 8; nt += 2)  // B from a row-major (N, K) tile: K in S = Q Kᵀ
      for (int ks = 0; ks < kD / 16; ++ks) {
        INFO("nt " << nt << " k-step " << ks);
        const auto addr = addresses([&](int lane) { return mma::b_nk_ldmatrix(lane, nt, ks); });
        CHECK(conflict_free(addr, ld));
        const auto regs = emulated_ldmatrix(tile, ld, addr, 4, false);
        for (int lane = 0; lane < 32; ++lane)
          for (int t = 0; t < 2; ++t)
            for (int i = 0; i < 4; ++i) {
              const mma::Coord s = mma::b_source_nk(lane, i, nt + t, ks);
              CHECK(regs[lane][2 * t + i / 2][i % 2] == tile[s.row * ld + s.col]);
            }
      }
    for (int nd = 0; nd < kD / 8; nd += 2)  // B from a row-major (K, N) tile, .trans: V in O = P V
      for (int kk = 0; kk < 4; ++kk) {
        INFO("nd " << nd << " k-step " << kk);
        const auto addr = addresses([&](int lane) { return mma::b_kn_ldmatrix_trans(lane, nd, kk); });
        CHECK(conflict_free(addr, ld));
        const auto regs = emulated_ldmatrix(tile, ld, addr, 4, true);
        for (int lane = 0; lane < 32; ++lane)
          for (int t = 0; t < 2; ++t)
            for (int i = 0; i < 4; ++i) {
              const mma::Coord s = mma::b_source_kn(lane, i, nd + t, kk);
              CHECK(regs[lane][2 * t + i / 2][i % 2] == tile[s.row * ld + s.col]);
            }
      }
  }
  // without the padding, the 8 rows of a matrix share one group of banks: the check above can fail
  CHECK_FALSE(conflict_free(addresses([](int lane) { return mma::a_ldmatrix(lane, 0); }), 64));
}

TEST_CASE("mma fragments: ldmatrix x1 and x2 give the first registers of x4", "[mma]") {
  // x1 reads the addresses of lanes 0-7, x2 of lanes 0-15; the registers they fill are x4's first ones, and a
  // later matrix loaded alone (its lanes' addresses moved to lanes 0-7) equals x4's register of that matrix.
  const int ld = 72;
  const std::vector<float> tile = numbered(64, ld);
  for (bool trans : {false, true}) {
    const auto addr = addresses([&](int lane) {
      return trans ? mma::b_kn_ldmatrix_trans(lane, 2, 1) : mma::b_nk_ldmatrix(lane, 2, 1);
    });
    const auto x4 = emulated_ldmatrix(tile, ld, addr, 4, trans);
    for (int num : {1, 2}) {
      const auto x = emulated_ldmatrix(tile, ld, addr, num, trans);
      for (int lane = 0; lane < 32; ++lane)
        for (int m = 0; m < 4; ++m) {
          INFO("trans " << trans << " x" << num << " lane " << lane << " matrix " << m);
          if (m < num)
            CHECK(x[lane][m] == x4[lane][m]);
          else
            CHECK(x[lane][m] == Reg{0, 0});  // not loaded
        }
    }
    for (int m = 1; m < 4; ++m) {
      std::array<mma::Coord, 32> alone{};
      for (int r = 0; r < 8; ++r) alone[r] = addr[8 * m + r];
      const auto x1 = emulated_ldmatrix(tile, ld, alone, 1, trans);
      for (int lane = 0; lane < 32; ++lane) CHECK(x1[lane][0] == x4[lane][m]);
    }
  }
}
