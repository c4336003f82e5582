// Printing (ops/format.h, autograd/format.h), .npy files (ops/io.h) and the DOT export (autograd/dot.h).
// The expected texts are PyTorch 1.13's repr of the same tensors, with saccade's shape/dtype/device suffix.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "helpers.h"

using namespace saccade;
using saccade::testing::allclose;

namespace {

std::string data_path(const std::string& name) { return std::string(SACCADE_TEST_DATA_DIR) + "/" + name; }

// A fresh folder under the system temp dir, removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           fmt::format("saccade_test_io_{}_{}", ::getpid(), reinterpret_cast<uintptr_t>(this));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

void write_bytes(const std::string& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

// ---- printing ----

TEST_CASE("format: small float tensors print like torch", "[ops][format]") {
  Tensor a = ops::tensor({1.25, -2.5, 3, 4}, {2, 2}, DType::Float64);
  CHECK(fmt::format("{}", a) ==
        "tensor([[ 1.2500, -2.5000],\n"
        "        [ 3.0000,  4.0000]], shape=[2, 2], dtype=float64, device=cpu)");
  std::ostringstream os;
  os << a;
  CHECK(os.str() == fmt::format("{}", a));
  // a transposed view prints its logical order
  CHECK(fmt::format("{}", a.t()) ==
        "tensor([[ 1.2500,  3.0000],\n"
        "        [-2.5000,  4.0000]], shape=[2, 2], dtype=float64, device=cpu)");
  // 3-d: blank lines between the 2-d blocks
  Tensor c = ops::add(ops::arange(0, 12, 1, DType::Float32).view({2, 2, 3}), 0.5);
  CHECK(fmt::format("{}", c) ==
        "tensor([[[ 0.5000,  1.5000,  2.5000],\n"
        "         [ 3.5000,  4.5000,  5.5000]],\n"
        "\n"
        "        [[ 6.5000,  7.5000,  8.5000],\n"
        "         [ 9.5000, 10.5000, 11.5000]]], shape=[2, 2, 3], dtype=float32, device=cpu)");
  // a row longer than 80 columns wraps
  Tensor r = ops::add(ops::mul(ops::arange(0, 20, 1, DType::Float32), 0.5), 0.25);
  CHECK(fmt::format("{}", r) ==
        "tensor([0.2500, 0.7500, 1.2500, 1.7500, 2.2500, 2.7500, 3.2500, 3.7500, 4.2500,\n"
        "        4.7500, 5.2500, 5.7500, 6.2500, 6.7500, 7.2500, 7.7500, 8.2500, 8.7500,\n"
        "        9.2500, 9.7500], shape=[20], dtype=float32, device=cpu)");
  // scientific notation for a wide range, nan and inf, 0-d, empty, undefined
  CHECK(fmt::format("{}", ops::tensor({1e-5, 1.5, -300})) ==
        "tensor([ 1.0000e-05,  1.5000e+00, -3.0000e+02], shape=[3], dtype=float32, device=cpu)");
  CHECK(fmt::format("{}", ops::tensor({NAN, INFINITY, -INFINITY, 1.5})) ==
        "tensor([   nan,    inf,   -inf, 1.5000], shape=[4], dtype=float32, device=cpu)");
  CHECK(fmt::format("{}", ops::scalar_tensor(3.5)) == "tensor(3.5000, shape=[], dtype=float32, device=cpu)");
  CHECK(fmt::format("{}", ops::zeros({0, 3})) == "tensor([], shape=[0, 3], dtype=float32, device=cpu)");
  CHECK(fmt::format("{}", Tensor()) == "tensor(undefined)");
}

TEST_CASE("format: bool and int tensors print like torch", "[ops][format]") {
  CHECK(fmt::format("{}", ops::from_vector(std::vector<bool>{true, false, true}, {1, 3})) ==
        "tensor([[ True, False,  True]], shape=[1, 3], dtype=bool, device=cpu)");
  CHECK(fmt::format("{}", ops::tensor({-3, 10, 250, 0}, {2, 2}, DType::Int64)) ==
        "tensor([[ -3,  10],\n"
        "        [250,   0]], shape=[2, 2], dtype=int64, device=cpu)");
  // int64 beyond 2^53 prints exactly
  CHECK(fmt::format("{}", ops::from_vector(std::vector<int64_t>{(int64_t{1} << 62) + 1}, {1})) ==
        "tensor([4611686018427387905], shape=[1], dtype=int64, device=cpu)");
}

TEST_CASE("format: more than 1000 elements are summarised", "[ops][format]") {
  Tensor a = ops::add(ops::mul(ops::arange(0, 2000, 1, DType::Float32), 0.01), 1.005).view({40, 50});
  CHECK(
      fmt::format("{}", a) ==
      "tensor([[ 1.0050,  1.0150,  1.0250,  ...,  1.4750,  1.4850,  1.4950],\n"
      "        [ 1.5050,  1.5150,  1.5250,  ...,  1.9750,  1.9850,  1.9950],\n"
      "        [ 2.0050,  2.0150,  2.0250,  ...,  2.4750,  2.4850,  2.4950],\n"
      "        ...,\n"
      "        [19.5050, 19.5150, 19.5250,  ..., 19.9750, 19.9850, 19.9950],\n"
      "        [20.0050, 20.0150, 20.0250,  ..., 20.4750, 20.4850, 20.4950],\n"
      "        [20.5050, 20.5150, 20.5250,  ..., 20.9750, 20.9850, 20.9950]], shape=[40, 50], dtype=float32, "
      "device=cpu)");
  CHECK(fmt::format("{}", ops::arange(1001)) ==
        "tensor([   0,    1,    2,  ...,  998,  999, 1000], shape=[1001], dtype=int64, device=cpu)");
  // a dim of at most 6 is shown whole; the last dim is cut
  std::string s = fmt::format("{}", ops::arange(2000).view({4, 5, 100}));
  CHECK(s.rfind("tensor([[[   0,    1,    2,  ...,   97,   98,   99],\n"
                "         [ 100,  101,  102,  ...,  197,  198,  199],\n",
                0) == 0);
  CHECK(s.find("\n\n        [[ 500,  501,  502,  ...,  597,  598,  599],\n") != std::string::npos);
  CHECK(s.find("[1900, 1901, 1902,  ..., 1997, 1998, 1999]]], shape=[4, 5, 100], dtype=int64, device=cpu)") !=
        std::string::npos);
}

TEST_CASE("format: variables add requires_grad and grad_fn", "[autograd][format]") {
  Variable x(ops::tensor({1, 2}, DType::Float64), true);
  CHECK(fmt::format("{}", x) ==
        "tensor([1.0000, 2.0000], shape=[2], dtype=float64, device=cpu, requires_grad=true)");
  Variable y = x * 2.0;
  CHECK(fmt::format("{}", y) ==
        "tensor([2.0000, 4.0000], shape=[2], dtype=float64, device=cpu, grad_fn=<mul>)");
  std::ostringstream os;
  os << Variable(ops::tensor({1}, DType::Int64));
  CHECK(os.str() == "tensor([1], shape=[1], dtype=int64, device=cpu)");
  CHECK(fmt::format("{}", Variable()) == "Variable(undefined)");
}

// ---- .npy ----

TEST_CASE("io: npy round trip for each dtype", "[ops][io]") {
  TempDir dir;
  std::vector<Tensor> ts = {
      ops::tensor({0, 0.5, 1, 1.5, 2, 2.5}, {2, 3}, DType::Float32),
      ops::tensor({1.5, -2.25, 3, 1e-300, INFINITY, -0.0}, {3, 2}, DType::Float64),
      ops::from_vector(std::vector<int64_t>{-(int64_t{1} << 62), -1, 0, 7, int64_t{1} << 62}, {5}),
      ops::from_vector(std::vector<bool>{true, false, true}, {1, 3}),
      ops::scalar_tensor(42.5, DType::Float64),
      ops::zeros({0, 4}, DType::Float32),
      ops::arange(0, 24, 1, DType::Float64).view({2, 3, 4}).permute({2, 0, 1}),  // non-contiguous
  };
  for (size_t k = 0; k < ts.size(); ++k) {
    INFO("tensor " << k);
    std::string file = dir / fmt::format("t{}.npy", k);
    ops::save_npy(ts[k], file);
    CHECK_FALSE(std::filesystem::exists(file + ".tmp"));
    Tensor back = ops::load_npy(file);
    CHECK(back.dtype() == ts[k].dtype());
    CHECK(back.shape() == ts[k].shape());
    CHECK(back.is_contiguous());
    CHECK(back.to_vector<double>() == ts[k].to_vector<double>());  // exact, infinities and -0.0 included
    // the data starts at a multiple of 64 bytes, as numpy writes it
    CHECK((read_bytes(file).size() - back.numel() * back.itemsize()) % 64 == 0);
  }
  // overwriting an existing file replaces it
  std::string file = dir / "t0.npy";
  ops::save_npy(ops::ones({2}, DType::Int64), file);
  CHECK(ops::load_npy(file).to_vector<int64_t>() == std::vector<int64_t>{1, 1});
}

TEST_CASE("io: files written by numpy load with the right values", "[ops][io]") {
  Tensor f4 = ops::load_npy(data_path("io_numpy_f4.npy"));
  CHECK(f4.dtype() == DType::Float32);
  CHECK(f4.shape() == Shape{2, 3});
  CHECK(f4.to_vector<float>() == std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1, 1.25f});
  Tensor f8 = ops::load_npy(data_path("io_numpy_f8.npy"));
  CHECK(f8.dtype() == DType::Float64);
  CHECK(f8.shape() == Shape{3, 2});
  std::vector<double> v = f8.to_vector<double>();
  CHECK(v[0] == 1.5);
  CHECK(v[1] == -2.25);
  CHECK(v[2] == M_PI);
  CHECK(v[3] == 1e-300);
  CHECK(std::isinf(v[4]));
  CHECK((v[5] == 0 && std::signbit(v[5])));
  Tensor i8 = ops::load_npy(data_path("io_numpy_i8.npy"));
  CHECK(i8.dtype() == DType::Int64);
  CHECK(i8.to_vector<int64_t>() == std::vector<int64_t>{-(int64_t{1} << 62), -1, 0, 7, int64_t{1} << 62});
  Tensor b1 = ops::load_npy(data_path("io_numpy_b1.npy"));
  CHECK(b1.dtype() == DType::Bool);
  CHECK(b1.shape() == Shape{1, 3});
  CHECK(b1.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
  Tensor s = ops::load_npy(data_path("io_numpy_scalar.npy"));
  CHECK(s.dim() == 0);
  CHECK(s.item() == 42.5);
}

TEST_CASE("io: saccade-written files for numpy", "[ops][io]") {
  // Writes the files that `make_elementwise.py --check-saccade-npy DIR` checks with numpy when
  // SACCADE_NPY_OUT names a folder (run by hand; see the script). Otherwise checks the header text.
  const char* out = std::getenv("SACCADE_NPY_OUT");
  TempDir dir;
  std::string folder = out ? std::string(out) : dir.path.string();
  ops::save_npy(ops::tensor({0, 0.5, 1, 1.5, 2, 2.5}, {2, 3}, DType::Float32), folder + "/saccade_f4.npy");
  ops::save_npy(ops::tensor({1.5, -2.25, 3, 1e-300, INFINITY, -0.0}, {3, 2}, DType::Float64),
                folder + "/saccade_f8.npy");
  ops::save_npy(ops::from_vector(std::vector<int64_t>{-(int64_t{1} << 62), -1, 0, 7, int64_t{1} << 62}, {5}),
                folder + "/saccade_i8.npy");
  ops::save_npy(ops::from_vector(std::vector<bool>{true, false, true}, {1, 3}), folder + "/saccade_b1.npy");
  ops::save_npy(ops::scalar_tensor(42.5, DType::Float64), folder + "/saccade_scalar.npy");
  std::string bytes = read_bytes(folder + "/saccade_i8.npy");
  CHECK(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  CHECK(bytes.find("{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }") == 10);
  CHECK(bytes.size() == 128 + 5 * 8);
  CHECK(bytes[127] == '\n');
  CHECK(read_bytes(folder + "/saccade_scalar.npy").find("'shape': (), }") != std::string::npos);
  CHECK(read_bytes(folder + "/saccade_f4.npy")
            .find("'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }") != std::string::npos);
}

TEST_CASE("io: missing corrupt truncated and unsupported files throw naming the file", "[ops][io][errors]") {
  TempDir dir;
  std::string missing = dir / "missing.npy";
  REQUIRE_THROWS_SACCADE(ops::load_npy(missing), "load_npy: " + missing + ": no such file");
  REQUIRE_THROWS_SACCADE(ops::load_npy(dir.path.string()), "no such file");  // a folder

  std::string good = dir / "good.npy";
  ops::save_npy(ops::arange(0, 10, 1, DType::Float64), good);
  const std::string bytes = read_bytes(good);

  std::string f = dir / "bad.npy";
  write_bytes(f, "PK\x03\x04 not an npy file at all");
  REQUIRE_THROWS_SACCADE(ops::load_npy(f), f + ": not a .npy file (bad magic string)");
  write_bytes(f, "");
  REQUIRE_THROWS_SACCADE(ops::load_npy(f), "bad magic");
  write_bytes(f, bytes.substr(0, bytes.size() - 1));
  REQUIRE_THROWS_SACCADE(ops::load_npy(f),
                         f + ": truncated data for shape [10] and dtype float64 needs 80 bytes");
  write_bytes(f, bytes.substr(0, 60));
  REQUIRE_THROWS_SACCADE(ops::load_npy(f), f + ": truncated header");
  write_bytes(f, bytes + "xx");
  REQUIRE_THROWS_SACCADE(ops::load_npy(f), "trailing");
  std::string v9 = bytes;
  v9[6] = 9;
  write_bytes(f, v9);
  REQUIRE_THROWS_SACCADE(ops::load_npy(f), "unsupported .npy format version 9.0");
  std::string garbled = bytes;
  garbled.replace(bytes.find("'shape'"), 7, "'shapf'");
  write_bytes(f, garbled);
  REQUIRE_THROWS_SACCADE(ops::load_npy(f), f + ": bad header (unknown key 'shapf')");
  std::string big_endian = bytes;
  big_endian.replace(bytes.find("<f8"), 3, ">f8");
  write_bytes(f, big_endian);
  REQUIRE_THROWS_SACCADE(ops::load_npy(f), "unsupported dtype '>f8'");
  REQUIRE_THROWS_SACCADE(ops::load_npy(data_path("io_numpy_i4.npy")),
                         "io_numpy_i4.npy: unsupported dtype '<i4'");
  REQUIRE_THROWS_SACCADE(ops::load_npy(data_path("io_numpy_fortran.npy")),
                         "io_numpy_fortran.npy: fortran_order True");
  // save: undefined tensor, unwritable folder; a failed save leaves no file behind
  REQUIRE_THROWS_SACCADE(ops::save_npy(Tensor(), dir / "u.npy"), "save_npy");
  std::string nowhere = dir / "no/such/folder/x.npy";
  REQUIRE_THROWS_SACCADE(ops::save_npy(ops::ones({2}), nowhere), "save_npy: " + nowhere + ": cannot open");
  CHECK_FALSE(std::filesystem::exists(nowhere));
}

// ---- DOT ----

TEST_CASE("dot: the graph of a tiny expression", "[autograd][dot]") {
  Variable x(ops::ones({2, 3}, DType::Float64), true), w(ops::ones({3}, DType::Float64), true);
  Variable c(ops::ones({3}, DType::Float64));  // a constant: not in the graph
  Variable y = sum(exp(x * w + c));
  std::string dot = to_dot(y);
  INFO(dot);
  CHECK(dot.rfind("digraph saccade {\n", 0) == 0);
  CHECK(dot.substr(dot.size() - 2) == "}\n");
  // numbering: the root first, then depth-first with input 0 before input 1
  CHECK(dot.find("  n0 [label=\"sum\\n[] float64\", style=bold];\n") != std::string::npos);
  CHECK(dot.find("  n1 [label=\"exp\\n[2, 3] float64\"];\n") != std::string::npos);
  CHECK(dot.find("  n2 [label=\"add\\n[2, 3] float64\"];\n") != std::string::npos);
  CHECK(dot.find("  n3 [label=\"mul\\n[2, 3] float64\"];\n") != std::string::npos);
  CHECK(dot.find("  n4 [label=\"AccumulateGrad\\n[2, 3] float64\", style=filled, fillcolor=lightblue];\n") !=
        std::string::npos);
  CHECK(dot.find("  n5 [label=\"AccumulateGrad\\n[3] float64\", style=filled, fillcolor=lightblue];\n") !=
        std::string::npos);
  // edges point from input to consumer; multi-input ops label the input position
  CHECK(dot.find("  n1 -> n0;\n") != std::string::npos);
  CHECK(dot.find("  n2 -> n1;\n") != std::string::npos);
  CHECK(dot.find("  n3 -> n2 [label=\"0\"];\n") != std::string::npos);
  CHECK(dot.find("  n4 -> n3 [label=\"0\"];\n") != std::string::npos);
  CHECK(dot.find("  n5 -> n3 [label=\"1\"];\n") != std::string::npos);
  CHECK(dot.find("n6") == std::string::npos);  // 6 nodes, the constant has none
  CHECK(std::count(dot.begin(), dot.end(), '>') == 5);
  // a shared input appears once, with one edge per use
  Variable z = x * x;
  std::string dz = to_dot(z);
  CHECK(dz.find("  n1 -> n0 [label=\"0\"];\n  n1 -> n0 [label=\"1\"];\n") != std::string::npos);
  CHECK(dz.find("n2") == std::string::npos);
  // no history: an empty graph; undefined: an error
  CHECK(to_dot(c) == "digraph saccade {\n  node [shape=box, fontname=\"monospace\"];\n}\n");
  REQUIRE_THROWS_SACCADE(to_dot(Variable()), "to_dot");
}

TEST_CASE("dot: a deep chain does not recurse", "[autograd][dot]") {
  Variable x(ops::ones({1}, DType::Float64), true);
  Variable y = x;
  for (int i = 0; i < 20000; ++i) y = y + 1.0;
  std::string dot = to_dot(y);
  CHECK(dot.find("n20000 [label=\"AccumulateGrad") != std::string::npos);
  CHECK(dot.find("n20001") == std::string::npos);
}
