// safetensors files (format, validation, atomic save) and model / optimizer checkpoints (exact resume).
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>

#include "helpers.h"

using namespace saccade;
using saccade::testing::allclose;
namespace fs = std::filesystem;

namespace {

// A fresh directory under /tmp for one test case, removed at the end.
struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() / fmt::format("saccade_checkpoint_{}_{}", ::getpid(), counter++);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file from a header text (padded to a multiple of 8) and raw data bytes.
std::string raw_file(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  return le64(header.size()) + header + data;
}

template <class T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (!(a.shape() == b.shape()) || a.dtype() != b.dtype()) return false;
  Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.raw_data(), y.raw_data(), x.numel() * x.itemsize()) == 0;
}

bool same_state(const nn::StateDict& a, const nn::StateDict& b) {
  if (a.keys() != b.keys()) return false;
  for (const auto& [k, t] : a)
    if (!bitwise_equal(t, b.at(k))) return false;
  return true;
}

nn::StateDict snapshot(const nn::Module& m) {
  nn::StateDict out;
  for (const auto& [k, t] : m.state_dict()) out.insert(k, t.clone());
  return out;
}

// x: (B, 3) -> y: (B);  h = tanh(x W1ᵀ + b1) (W1: (H, 3)), y = h · w2 + b2. Written with broadcasting only.
struct TinyNet : nn::Module {
  Variable w1, b1, w2, b2, steps;
  TinyNet(uint64_t seed, int64_t hidden = 4) : Module("TinyNet") {
    Generator gen(seed);
    w1 = register_parameter("w1", ops::empty({hidden, 3}));
    b1 = register_parameter("b1", ops::empty({hidden}));
    nn::init::linear_default_init_(w1.data(), b1.data(), &gen);
    w2 = register_parameter("w2", ops::empty({hidden}));
    b2 = register_parameter("b2", ops::zeros({1}));
    nn::init::uniform_(w2.data(), -0.5, 0.5, &gen);
    steps = register_buffer("steps", ops::zeros({}, DType::Int64));
  }
  Variable forward(const Tensor& x) const {
    Variable xb(x.reshape({x.size(0), 1, 3}));
    Variable h = tanh(sum(xb * w1, {2}) + b1);  // (B, H)
    return sum(h * w2, {1}) + b2;
  }
};

// Steps [from, to) of a deterministic training run: batch s comes from seed 1000 + s.
void train(TinyNet& m, nn::Optimizer& opt, nn::LRScheduler& sched, int from, int to) {
  for (int s = from; s < to; ++s) {
    Generator gen(1000 + s);
    Tensor x = ops::randn({8, 3}, DType::Float32, Device::cpu(), &gen);
    Tensor t = ops::randn({8}, DType::Float32, Device::cpu(), &gen);
    opt.zero_grad();
    Variable diff = m.forward(x) - Variable(t);
    mean(diff * diff).backward();
    nn::clip_grad_norm_(m.parameters(), 1.0);
    opt.step();
    sched.step();
    Tensor st = m.steps.data();
    ops::add_(st, ops::ones({}, DType::Int64));
  }
}

}  // namespace

TEST_CASE("safetensors: reads the reference layout and writes it byte for byte", "[nn][checkpoint]") {
  // The fixture was written by tests/fixtures/make_optim.py, an independent writer of the format.
  const std::string path = std::string(SACCADE_TEST_DATA_DIR) + "/optim_checkpoint_format.safetensors";
  nn::Safetensors file = nn::load_safetensors(path);
  nn::StateDict expected;
  expected.insert("a.f32", ops::from_vector<float>({-1, -0.5, 0, 0.5, 1, 1.5}, {2, 3}));
  expected.insert("b.f64", ops::from_vector<double>({1.0 / 3, -2.5, 1e300, -0.0}, {4}));
  expected.insert("c.i64",
                  ops::from_vector<int64_t>({-(int64_t{1} << 62), 7, 0, (int64_t{1} << 53) + 1}, {2, 2}));
  expected.insert("d.bool", ops::from_vector<bool>({true, false, false, true, true}, {5}));
  expected.insert("e.scalar", ops::from_vector<float>({3.25f}, {}));
  expected.insert("f.empty", ops::zeros({0, 3}));
  // File order: by dtype (I64, F64, F32, BOOL), then by name.
  REQUIRE(file.tensors.keys() ==
          std::vector<std::string>{"c.i64", "b.f64", "a.f32", "e.scalar", "f.empty", "d.bool"});
  for (const auto& [k, t] : expected) {
    INFO(k);
    REQUIRE(bitwise_equal(file.tensors.at(k), t));
  }
  REQUIRE(file.metadata == nn::Metadata{{"format", "pt"}});

  TempDir dir;
  nn::save_safetensors(expected, dir.file("ours.safetensors"), {{"format", "pt"}});
  REQUIRE(read_bytes(dir.file("ours.safetensors")) == read_bytes(path));
  REQUIRE_FALSE(fs::exists(dir.file("ours.safetensors.tmp")));
}

TEST_CASE("safetensors: the reference implementation's test vectors", "[nn][checkpoint]") {
  // From huggingface/safetensors, safetensors/src/tensor.rs: test_serialization, test_empty and
  // test_serialization_forced_alignement.
  TempDir dir;
  std::vector<float> values = {0, 1, 2, 3, 4, 5};
  nn::StateDict one;
  one.insert("attn.0", ops::from_vector(values, {1, 2, 3}));
  nn::save_safetensors(one, dir.file("a"));
  REQUIRE(read_bytes(dir.file("a")) ==
          le64(64) + R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})" +
              bytes_of(values));

  nn::StateDict aligned;
  aligned.insert("attn0", ops::from_vector(values, {1, 1, 2, 3}));
  nn::save_safetensors(aligned, dir.file("b"));
  REQUIRE(read_bytes(dir.file("b")) ==
          le64(72) + R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})" +
              std::string(7, ' ') + bytes_of(values));

  nn::save_safetensors({}, dir.file("c"));
  REQUIRE(read_bytes(dir.file("c")) == le64(8) + "{}      ");
  nn::save_safetensors({}, dir.file("d"), {{"framework", "pt"}});
  REQUIRE(read_bytes(dir.file("d")) == le64(40) + R"({"__metadata__":{"framework":"pt"}})" + "     ");
  REQUIRE(nn::load_safetensors(dir.file("d")).metadata.at("framework") == "pt");
  REQUIRE(nn::load_safetensors(dir.file("c")).tensors.empty());
}

TEST_CASE("safetensors: round trip of every dtype, views and odd shapes", "[nn][checkpoint]") {
  TempDir dir;
  Generator gen(4);
  nn::StateDict d;
  d.insert("f32", ops::randn({3, 5}, DType::Float32, Device::cpu(), &gen));
  d.insert("f64.transposed", ops::randn({4, 2}, DType::Float64, Device::cpu(), &gen).t());
  d.insert("i64", ops::arange(-5, 7));
  d.insert("bool", ops::gt(ops::randn({2, 3, 2}, DType::Float32, Device::cpu(), &gen), 0.0));
  d.insert("scalar", ops::scalar_tensor(-7.5, DType::Float64));
  d.insert("empty", ops::empty({2, 0, 4}, DType::Int64));
  d.insert("unicode \xc3\xa9", ops::ones({1}));
  d.insert("sliced", ops::arange(20, DType::Float32).slice(0, 1, 20, 3));
  nn::save_safetensors(d, dir.file("x.safetensors"), {{"step", "12"}, {"note", "hello \"world\""}});
  nn::Safetensors back = nn::load_safetensors(dir.file("x.safetensors"));
  REQUIRE(back.tensors.size() == d.size());
  for (const auto& [k, t] : d) {
    INFO(k);
    REQUIRE(bitwise_equal(back.tensors.at(k), t));
    if (t.numel() > 0)
      REQUIRE(back.tensors.at(k).is_contiguous());  // core: is_contiguous() is false for some empty shapes
  }
  REQUIRE(back.metadata == nn::Metadata{{"note", "hello \"world\""}, {"step", "12"}});
  // Saving again over the same path replaces the file.
  nn::save_safetensors(nn::StateDict(), dir.file("x.safetensors"));
  REQUIRE(nn::load_safetensors(dir.file("x.safetensors")).tensors.empty());
}

TEST_CASE("safetensors: corrupt and truncated files are rejected", "[nn][checkpoint]") {
  TempDir dir;
  const std::string p = dir.file("bad.safetensors");
  auto rejects = [&](const std::string& bytes, const std::string& what) {
    write_bytes(p, bytes);
    REQUIRE_THROWS_SACCADE(nn::load_safetensors(p), "load_safetensors: '" + p + "'");
    REQUIRE_THROWS_SACCADE(nn::load_safetensors(p), what);
  };
  const std::string f32x2 = bytes_of(std::vector<float>{1, 2});
  auto entry = [](const std::string& name, const std::string& dtype, const std::string& shape, int b, int e) {
    return fmt::format(R"("{}":{{"dtype":"{}","shape":{},"data_offsets":[{},{}]}})", name, dtype, shape, b,
                       e);
  };
  rejects("abc", "file too short");
  rejects(le64(1000) + "{}",
          "not a safetensors file: its first 8 bytes, read as the header's length, give "
          "1000 bytes, more than the file's 10 bytes");
  rejects(le64(uint64_t{1} << 40) + "{}", "more than the limit of");
  // issue 49 item 21: a CSV given as a checkpoint was reported by its "header length" of 19 digits
  rejects("step,seconds,lr,train_loss\n1,0.5,0.001,5.5\n",
          "not a safetensors file (it begins like a text file: \"step,sec\"): its first 8 bytes");
  rejects(raw_file("{\"a\": ", ""), "invalid JSON header");
  rejects(raw_file("[1, 2]", ""), "not a JSON object");
  rejects(raw_file(std::string("{") + entry("a", "F8_E4M3", "[2]", 0, 2) + "}", f32x2.substr(0, 2)),
          "unsupported dtype \"F8_E4M3\"");
  rejects(raw_file(std::string("{") + entry("a", "F32", "[2]", 0, 16) + "}", f32x2),
          "outside the data buffer");
  rejects(raw_file(std::string("{") + entry("a", "F32", "[3]", 0, 8) + "}", f32x2), "needs 12 bytes");
  rejects(raw_file(std::string("{") + entry("a", "F32", "[-2]", 0, 8) + "}", f32x2), "invalid shape");
  rejects(raw_file(std::string("{") + entry("a", "F32", "[2]", 8, 0) + "}", f32x2),
          "outside the data buffer");
  rejects(raw_file(R"({"a":{"dtype":"F32","shape":[2]}})", f32x2), "needs an object with dtype");
  rejects(
      raw_file(std::string("{") + entry("a", "F32", "[1]", 0, 4) + "," + entry("b", "F32", "[1]", 0, 4) + "}",
               f32x2),
      "overlaps");
  rejects(raw_file(std::string("{") + entry("a", "F32", "[1]", 4, 8) + "}", f32x2),
          "hole in the data buffer");
  rejects(raw_file(std::string("{") + entry("a", "F32", "[1]", 0, 4) + "}", f32x2),
          "cover 4 bytes of a data buffer of 8");
  rejects(
      raw_file(std::string("{") + entry("a", "F32", "[2]", 0, 8) + "," + entry("a", "F32", "[2]", 0, 8) + "}",
               f32x2),
      "duplicate key 'a'");
  rejects(raw_file(std::string("{") + entry("a", "BOOL", "[2]", 0, 2) + "}", std::string("\x01\x02", 2)),
          "bool tensor 'a'");
  rejects(raw_file(R"({"__metadata__":{"step":3}})", ""), "not a string");

  // A valid file truncated anywhere is rejected.
  nn::StateDict d;
  d.insert("w", ops::ones({4, 4}));
  d.insert("b", ops::zeros({4}, DType::Int64));
  nn::save_safetensors(d, dir.file("good.safetensors"));
  std::string good = read_bytes(dir.file("good.safetensors"));
  for (size_t cut : {size_t{0}, size_t{7}, size_t{8}, size_t{40}, good.size() - 80, good.size() - 1}) {
    INFO("truncated to " << cut);
    write_bytes(p, good.substr(0, cut));
    REQUIRE_THROWS_AS(nn::load_safetensors(p), Error);
  }
  REQUIRE_THROWS_SACCADE(nn::load_safetensors(dir.file("missing.safetensors")), "cannot open");
}

TEST_CASE("safetensors: bad saves throw and leave no file", "[nn][checkpoint]") {
  TempDir dir;
  nn::StateDict d;
  d.insert("w", Tensor());
  REQUIRE_THROWS_SACCADE(nn::save_safetensors(d, dir.file("u")), "tensor 'w' is undefined");
  nn::StateDict m;
  m.insert("__metadata__", ops::ones({1}));
  REQUIRE_THROWS_SACCADE(nn::save_safetensors(m, dir.file("m")), "reserved");
  nn::StateDict ok;
  ok.insert("w", ops::ones({1}));
  const std::string nowhere = dir.file("no/such/dir/x.safetensors");
  REQUIRE_THROWS_SACCADE(nn::save_safetensors(ok, nowhere), nowhere);
  REQUIRE(fs::is_empty(dir.path));
}

TEST_CASE("checkpoint: save and load a module", "[nn][checkpoint]") {
  TempDir dir;
  TinyNet a(1), b(2);
  nn::save(a, dir.file("a.safetensors"), {{"note", "x"}});
  REQUIRE_FALSE(same_state(snapshot(a), snapshot(b)));
  nn::Metadata meta = nn::load(b, dir.file("a.safetensors"));
  REQUIRE(meta.at("note") == "x");
  REQUIRE(meta.at("format") == "pt");
  REQUIRE(same_state(snapshot(a), snapshot(b)));

  // Wrong shapes, wrong names, or a corrupt file: an error naming the key / file, and b is unchanged.
  TinyNet wide(3, /*hidden=*/5);
  nn::StateDict before = snapshot(wide);
  REQUIRE_THROWS_SACCADE(nn::load(wide, dir.file("a.safetensors")),
                         "size mismatch for 'w1': the checkpoint has shape [4, 3], the module [5, 3]");
  REQUIRE(same_state(snapshot(wide), before));

  nn::Module other("Other");
  other.register_parameter("w1", ops::zeros({4, 3}));
  REQUIRE_THROWS_SACCADE(nn::load(other, dir.file("a.safetensors")), "unexpected key");
  REQUIRE(allclose(other.parameter("w1").data(), ops::zeros({4, 3})));

  std::string bytes = read_bytes(dir.file("a.safetensors"));
  write_bytes(dir.file("cut.safetensors"), bytes.substr(0, bytes.size() - 3));
  TinyNet c(5);
  before = snapshot(c);
  REQUIRE_THROWS_SACCADE(nn::load(c, dir.file("cut.safetensors")), "cut.safetensors");
  REQUIRE(same_state(snapshot(c), before));
}

TEST_CASE("checkpoint: a resumed run continues exactly", "[nn][checkpoint]") {
  using MakeOpt = std::function<std::unique_ptr<nn::Optimizer>(const nn::Module&)>;
  std::vector<std::pair<std::string, MakeOpt>> optimizers = {
      {"AdamW",
       [](const nn::Module& m) {
         return std::make_unique<nn::AdamW>(m.parameters(),
                                            nn::AdamOptions{.lr = 0.05, .weight_decay = 0.05});
       }},
      {"SGD", [](const nn::Module& m) {
         return std::make_unique<nn::SGD>(m.parameters(),
                                          nn::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
       }}};
  for (const auto& [name, make] : optimizers) {
    INFO(name);
    TempDir dir;
    const std::string path = dir.file("ckpt.safetensors");
    const int k = 3, n = 4;

    TinyNet a(1);
    auto opt_a = make(a);
    nn::LinearWarmup sched_a(*opt_a, 2, 0.5, 10);
    train(a, *opt_a, sched_a, 0, k);
    nn::save_checkpoint(path, a, *opt_a, k, {{"run", "test"}});
    train(a, *opt_a, sched_a, k, k + n);

    TinyNet b(99);  // another initialisation, replaced by the checkpoint
    auto opt_b = make(b);
    nn::LinearWarmup sched_b(*opt_b, 2, 0.5, 10);
    nn::CheckpointInfo info = nn::load_checkpoint(path, b, *opt_b);
    REQUIRE(info.step == k);
    REQUIRE(info.metadata.at("run") == "test");
    sched_b.set_last_epoch(info.step);
    train(b, *opt_b, sched_b, k, k + n);

    REQUIRE(same_state(snapshot(a), snapshot(b)));  // bitwise, buffers included
    REQUIRE(b.steps.data().item<int64_t>() == k + n);
    REQUIRE(opt_a->lr() == opt_b->lr());
    REQUIRE(same_state(opt_a->state_dict(), opt_b->state_dict()));
  }
}

TEST_CASE("checkpoint: bad checkpoints leave module and optimizer unchanged", "[nn][checkpoint]") {
  TempDir dir;
  TinyNet a(1);
  nn::SGD sgd(a.parameters(), nn::SGDOptions{.lr = 0.1, .momentum = 0.9});
  nn::LinearWarmup sched(sgd, 1);
  train(a, sgd, sched, 0, 2);
  nn::save_checkpoint(dir.file("sgd.safetensors"), a, sgd, 2);
  nn::save(a, dir.file("model.safetensors"));
  // safetensors readers see the model under its own names, the optimizer under "optimizer.".
  nn::Safetensors raw = nn::load_safetensors(dir.file("sgd.safetensors"));
  REQUIRE(raw.tensors.contains("w1"));
  REQUIRE(raw.tensors.contains("optimizer.state.0.momentum_buffer"));
  REQUIRE(raw.tensors.contains("optimizer.param_groups.0.lr"));
  REQUIRE(raw.metadata.at("step") == "2");
  // load() of a checkpoint file ignores the optimizer part.
  TinyNet c(7);
  nn::load(c, dir.file("sgd.safetensors"));
  REQUIRE(same_state(snapshot(a), snapshot(c)));

  TinyNet b(3);
  nn::Adam adam(b.parameters());
  nn::LinearWarmup sched_b(adam, 1);
  train(b, adam, sched_b, 0, 1);
  nn::StateDict model_before = snapshot(b), optim_before = adam.state_dict();
  auto unchanged = [&] {
    REQUIRE(same_state(snapshot(b), model_before));
    REQUIRE(same_state(adam.state_dict(), optim_before));
  };
  REQUIRE_THROWS_SACCADE(nn::load_checkpoint(dir.file("sgd.safetensors"), b, adam), "unexpected state key");
  unchanged();
  REQUIRE_THROWS_SACCADE(nn::load_checkpoint(dir.file("model.safetensors"), b, adam), "no 'step'");
  unchanged();
  TinyNet wide(3, 5);
  nn::SGD sgd_wide(wide.parameters(), nn::SGDOptions{.lr = 0.1, .momentum = 0.9});
  REQUIRE_THROWS_SACCADE(nn::load_checkpoint(dir.file("sgd.safetensors"), wide, sgd_wide), "size mismatch");
  REQUIRE_THROWS_SACCADE(nn::save_checkpoint(dir.file("x"), a, sgd, -1), "negative step");
  REQUIRE_THROWS_SACCADE(nn::save_checkpoint(dir.file("x"), a, sgd, 1, {{"step", "1"}}), "reserved");
}
