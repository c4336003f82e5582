// GGUF, llama.cpp's file format (issue 51 item 5, issue 53 item 3): the reader on files this test writes
// byte by byte (every value type, every tensor type read, every refusal), and the model files that
// tests/fixtures/make_gguf.py wrote with the gguf package from the fixture folders (tests/data/gguf): each
// loads to the folder's logits (its dtype's rounding aside), its Q8_0 blocks are those ops::quantize_q8_0
// makes of the folder's weights, and its vocabulary encodes as the folder's tokenizer.
#ifdef SACCADE_HAVE_HF
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "helpers.h"
#include "hf/gguf.h"
#include "hf/gguf_model.h"
#include "hf/llama.h"
#include "hf/tokenizer.h"
#include "hf_family.h"
#include "hf_fixture.h"
#include "nn/linear.h"
#include "ops/creation.h"
#include "ops/half.h"
#include "ops/quant.h"

using namespace saccade;
using saccade::testing::allclose;
using saccade::testing::error_of;
using saccade::testing::file_bytes;
using saccade::testing::hf_data;

namespace {

// A GGUF file built field by field (little-endian, version 3, alignment 32 unless a key says).
struct GgufBuilder {
  std::string meta, infos, data;
  uint64_t n_kv = 0, n_tensors = 0;
  uint32_t version = 3;
  uint64_t alignment = 32;

  template <typename T>
  static void put(std::string& s, T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  static void str(std::string& s, const std::string& v) {
    put<uint64_t>(s, v.size());
    s += v;
  }
  // A key with its value's type and bytes (already encoded).
  GgufBuilder& kv(const std::string& key, uint32_t type, const std::string& value) {
    str(meta, key);
    put<uint32_t>(meta, type);
    meta += value;
    ++n_kv;
    return *this;
  }
  template <typename T>
  static std::string enc(T v) {
    std::string s;
    put<T>(s, v);
    return s;
  }
  static std::string enc_str(const std::string& v) {
    std::string s;
    str(s, v);
    return s;
  }
  GgufBuilder& u32(const std::string& key, uint32_t v) { return kv(key, 4, enc(v)); }
  GgufBuilder& f32(const std::string& key, float v) { return kv(key, 6, enc(v)); }
  GgufBuilder& text(const std::string& key, const std::string& v) { return kv(key, 8, enc_str(v)); }
  GgufBuilder& flag(const std::string& key, bool v) { return kv(key, 7, enc<uint8_t>(v ? 1 : 0)); }
  GgufBuilder& strings(const std::string& key, const std::vector<std::string>& v) {
    std::string s = enc<uint32_t>(8) + enc<uint64_t>(v.size());
    for (const std::string& x : v) s += enc_str(x);
    return kv(key, 9, s);
  }
  GgufBuilder& ints(const std::string& key, const std::vector<int32_t>& v) {
    std::string s = enc<uint32_t>(5) + enc<uint64_t>(v.size());
    for (int32_t x : v) s += enc(x);
    return kv(key, 9, s);
  }
  // A tensor of ggml type `type` with dims `ne` (innermost first) and its bytes, at the next aligned offset
  // (or at `offset` when given).
  GgufBuilder& tensor(const std::string& name, const std::vector<uint64_t>& ne, uint32_t type,
                      const std::string& bytes, int64_t offset = -1) {
    while (data.size() % alignment) data += '\0';
    str(infos, name);
    put<uint32_t>(infos, static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) put<uint64_t>(infos, n);
    put<uint32_t>(infos, type);
    put<uint64_t>(infos, offset >= 0 ? static_cast<uint64_t>(offset) : data.size());
    data += bytes;
    ++n_tensors;
    return *this;
  }
  std::string bytes() const {
    std::string s = "GGUF";
    put<uint32_t>(s, version);
    put<uint64_t>(s, n_tensors);
    put<uint64_t>(s, n_kv);
    s += meta + infos;
    while (s.size() % alignment) s += '\0';
    return s + data;
  }
};

std::string floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

// Q8_0 blocks of rows × (32 · blocks) weights: block b of row r has d = 0.25 (r + 1) and q_i = i - 16 + b.
std::string q8_0_bytes(int rows, int blocks) {
  std::string s;
  for (int r = 0; r < rows; ++r)
    for (int b = 0; b < blocks; ++b) {
      GgufBuilder::put<uint16_t>(s, float_to_f16_bits(0.25f * static_cast<float>(r + 1)));
      for (int i = 0; i < 32; ++i) GgufBuilder::put<int8_t>(s, static_cast<int8_t>(i - 16 + b));
    }
  return s;
}

std::string parse_error(const std::string& bytes) {
  return error_of([&] { hf::GgufFile::parse(bytes, "t.gguf"); });
}

// The metadata of a small Llama (hidden 8, 2 heads of 4, 1 key/value head, 2 layers, vocab 5) and its
// tensors, for gguf_config's and GgufWeights' checks: `key` set to `value` among the sizes, the norms'
// epsilon `eps`, the rotary base `theta`.
GgufBuilder small_llama(const std::string& arch = "llama", const std::string& key = "", uint32_t value = 0,
                        float eps = 1e-6f, float theta = 500.0f) {
  GgufBuilder g;
  g.text("general.architecture", arch)
      .f32(arch + ".rope.freq_base", theta)
      .f32(arch + ".attention.layer_norm_rms_epsilon", eps);
  const std::pair<const char*, uint32_t> ints[] = {
      {"block_count", 2},          {"context_length", 16},
      {"embedding_length", 8},     {"feed_forward_length", 12},
      {"attention.head_count", 2}, {"attention.head_count_kv", 1},
      {"rope.dimension_count", 4}, {"vocab_size", 5}};
  for (const auto& [k, v] : ints) g.u32(arch + "." + k, k == key ? value : v);
  return g;
}

// gguf_config of a file built in the test, and the message of what it throws.
hf::Config config_of(const GgufBuilder& g) {
  return hf::gguf_config(*hf::GgufFile::parse(g.bytes(), "t.gguf"));
}
std::string config_error(const GgufBuilder& g) {
  return error_of([&] { config_of(g); });
}

}  // namespace

TEST_CASE("GGUF: metadata of every value type and F32, F16, BF16 and Q8_0 tensors read back", "[hf][gguf]") {
  GgufBuilder g;
  using B = GgufBuilder;
  g.kv("u8", 0, B::enc<uint8_t>(200))
      .kv("i8", 1, B::enc<int8_t>(-100))
      .kv("u16", 2, B::enc<uint16_t>(60000))
      .kv("i16", 3, B::enc<int16_t>(-30000))
      .u32("u32", 4000000000u)
      .kv("i32", 5, B::enc<int32_t>(-2000000000))
      .f32("f32", 0.5f)
      .flag("bool", true)
      .text("string", "h\xc3\xa9llo")
      .kv("u64", 10, B::enc<uint64_t>(uint64_t{1} << 40))
      .kv("i64", 11, B::enc<int64_t>(-(int64_t{1} << 40)))
      .kv("f64", 12, B::enc<double>(0.1))
      .strings("strings", {"a", "", "ccc"})
      .kv("nested", 9,
          B::enc<uint32_t>(9) + B::enc<uint64_t>(2) + B::enc<uint32_t>(5) + B::enc<uint64_t>(1) +
              B::enc<int32_t>(7) + B::enc<uint32_t>(5) + B::enc<uint64_t>(0));
  const std::vector<float> a = {0, 1, 2, 3, 4, 5};
  std::string h, bf;
  for (float x : a)
    B::put<uint16_t>(h, float_to_f16_bits(x + 0.5f)), B::put<uint16_t>(bf, float_to_bf16_bits(-x));
  g.tensor("a", {3, 2}, 0, floats(a))
      .tensor("h", {3, 2}, 1, h)
      .tensor("bf", {6}, 30, bf)
      .tensor("q", {64, 3}, 8, q8_0_bytes(3, 2))
      .tensor("k", {256, 1}, 12, std::string(144, '\1'));  // Q4_K: listed, not read
  const auto f = hf::GgufFile::parse(g.bytes(), "t.gguf");
  CHECK(f->version() == 3);
  CHECK(f->metadata().size() == 14);
  CHECK(f->find("u8")->i == 200);
  CHECK(f->find("i8")->i == -100);
  CHECK(f->find("u16")->i == 60000);
  CHECK(f->find("i16")->i == -30000);
  CHECK(f->find("u32")->i == 4000000000LL);
  CHECK(f->find("i32")->i == -2000000000LL);
  CHECK(f->find("f32")->f == 0.5);
  CHECK((f->find("bool")->kind == hf::GgufValue::Kind::Bool && f->find("bool")->b));
  CHECK(f->find("string")->s == "h\xc3\xa9llo");
  CHECK(f->find("u64")->i == (int64_t{1} << 40));
  CHECK(f->find("i64")->i == -(int64_t{1} << 40));
  CHECK(f->find("f64")->f == 0.1);
  REQUIRE(f->find("strings")->array.size() == 3);
  CHECK(f->find("strings")->array[2].s == "ccc");
  REQUIRE(f->find("nested")->array.size() == 2);
  CHECK(f->find("nested")->array[0].array[0].i == 7);
  CHECK(f->find("nested")->array[1].array.empty());
  CHECK(f->find("absent") == nullptr);

  REQUIRE(f->tensors().size() == 5);
  const hf::GgufTensorInfo& ta = *f->tensor("a");
  CHECK(ta.shape == Shape({2, 3}));  // ne [3, 2] is two rows of three
  for (DType d : {DType::Float32, DType::BFloat16, DType::Float16}) {
    Tensor out = Tensor::empty({2, 3}, d);
    f->read_into(ta, out);
    CHECK(allclose(out.to(DType::Float32), ops::from_vector(a, {2, 3}), 0, 0));
  }
  Tensor out = Tensor::empty({2, 3}, DType::Float32);
  f->read_into(*f->tensor("h"), out);
  CHECK(out.data<float>()[5] == 5.5f);
  Tensor out6 = Tensor::empty({6}, DType::Float32);
  f->read_into(*f->tensor("bf"), out6);
  CHECK(out6.data<float>()[4] == -4.0f);
  // Q8_0: d · q, hand-computed
  const hf::GgufTensorInfo& tq = *f->tensor("q");
  CHECK(tq.shape == Shape({3, 64}));
  Tensor q = Tensor::empty({3, 64}, DType::Float32);
  f->read_into(tq, q);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 64; ++c)
      CHECK(q.data<float>()[r * 64 + c] ==
            0.25f * static_cast<float>(r + 1) * static_cast<float>(c % 32 - 16 + c / 32));
  const Q8_0Matrix blocks = f->q8_0(tq);
  CHECK((blocks.rows == 3 && blocks.cols == 64));
  CHECK(allclose(ops::dequantize_q8_0(blocks), q, 0, 0));
  // a type not read: listed, refused by name when read
  CHECK(hf::gguf_type_name(f->tensor("k")->type) == "Q4_K");
  CHECK_THAT(error_of([&] {
               f->read_into(*f->tensor("k"), Tensor::empty({1, 256}, DType::Float32));
             }),
             Catch::Contains("tensor 'k' is Q4_K, which saccade does not read"));
  CHECK_THAT(error_of([&] { f->q8_0(ta); }), Catch::Contains("need a 2-d Q8_0 tensor"));
  CHECK_THAT(error_of([&] { f->read_into(ta, Tensor::empty({5}, DType::Float32)); }),
             Catch::Contains("into a destination of shape"));
}

TEST_CASE("GGUF: every cut of a file and each malformed header is refused by name", "[hf][gguf]") {
  GgufBuilder g;
  g.text("general.name", "x").strings("list", {"a", "b"}).tensor("a", {4}, 0, floats({1, 2, 3, 4}));
  g.tensor("q", {32, 1}, 8, q8_0_bytes(1, 1));
  const std::string whole = g.bytes();
  REQUIRE(parse_error(whole) == "(no error)");
  for (size_t n = 0; n < whole.size(); ++n) {
    CAPTURE(n);
    CHECK_THAT(parse_error(whole.substr(0, n)), Catch::StartsWith("hf::GgufFile: 't.gguf': "));
  }
  CHECK_THAT(parse_error(whole.substr(0, whole.size() - 1)), Catch::Contains("tensor 'q' (Q8_0, 34 bytes"));
  std::string bad = whole;
  bad[0] = 'X';
  CHECK_THAT(parse_error(bad), Catch::Contains("not a GGUF file"));
  GgufBuilder v1 = g;
  v1.version = 1;
  CHECK_THAT(parse_error(v1.bytes()), Catch::Contains("version 1 (2 and 3 are read)"));
  v1.version = 0x03000000u;
  CHECK_THAT(parse_error(v1.bytes()), Catch::Contains("a big-endian file"));
  auto with = [](const std::function<void(GgufBuilder&)>& edit) {
    GgufBuilder b;
    edit(b);
    return parse_error(b.bytes());
  };
  CHECK_THAT(with([](GgufBuilder& b) { b.kv("k", 13, ""); }),
             Catch::Contains("key 'k': unknown value type 13"));
  CHECK_THAT(with([](GgufBuilder& b) { b.kv("k", 7, GgufBuilder::enc<uint8_t>(2)); }),
             Catch::Contains("the bool is 2"));
  CHECK_THAT(with([](GgufBuilder& b) { b.u32("k", 1).u32("k", 2); }),
             Catch::Contains("key 'k' is given twice"));
  CHECK_THAT(with([](GgufBuilder& b) { b.kv("k", 10, GgufBuilder::enc<uint64_t>(~uint64_t{0})); }),
             Catch::Contains("over 2^63 - 1"));
  CHECK_THAT(with([](GgufBuilder& b) {
               std::string nest;
               for (int i = 0; i < 5; ++i)
                 nest += GgufBuilder::enc<uint32_t>(9) + GgufBuilder::enc<uint64_t>(1);
               b.kv("k", 9, nest + GgufBuilder::enc<uint32_t>(4) + GgufBuilder::enc<uint64_t>(0));
             }),
             Catch::Contains("arrays nested deeper than 4"));
  CHECK_THAT(with([](GgufBuilder& b) {  // a length that the file cannot hold, refused before allocating
               b.kv("k", 9, GgufBuilder::enc<uint32_t>(8) + GgufBuilder::enc<uint64_t>(uint64_t{1} << 60));
             }),
             Catch::Contains("cut short: an array"));
  CHECK_THAT(with([](GgufBuilder& b) {
               b.tensor("a", {4}, 0, floats({1, 2, 3, 4})).tensor("a", {4}, 0, floats({1, 2, 3, 4}));
             }),
             Catch::Contains("tensor 'a' is given twice"));
  CHECK_THAT(with([](GgufBuilder& b) {
               b.tensor("a", {4}, 0, floats({1, 2, 3, 4}), 8);
             }),
             Catch::Contains("tensor 'a': offset 8 is not a multiple of the alignment 32"));
  CHECK_THAT(with([](GgufBuilder& b) { b.u32("general.alignment", 3); }),
             Catch::Contains("not a power of two"));
  CHECK_THAT(with([](GgufBuilder& b) {
               b.tensor("q", {48, 1}, 8, std::string(51, '\0'));
             }),
             Catch::Contains("tensor 'q': Q8_0 rows of 48 are not whole blocks of 32"));
  CHECK_THAT(with([](GgufBuilder& b) { b.tensor("a", {}, 0, ""); }),
             Catch::Contains("tensor 'a': 0 dimensions"));
  CHECK_THAT(with([](GgufBuilder& b) {
               b.tensor("a", {1, 1, 1, 1, 1}, 0, floats({1}));
             }),
             Catch::Contains("tensor 'a': 5 dimensions"));
  CHECK_THAT(with([](GgufBuilder& b) {
               b.tensor("a", {4, 0}, 0, "");
             }),
             Catch::Contains("tensor 'a': dimension 1 is 0"));
  CHECK_THAT(with([](GgufBuilder& b) {
               b.tensor("a", {uint64_t{1} << 40, uint64_t{1} << 40}, 0, "");
             }),
             Catch::Contains("at most 2^62 elements"));
  CHECK_THAT(error_of([] { hf::GgufFile("/nonexistent/x.gguf"); }),
             Catch::Contains("hf::GgufFile: '/nonexistent/x.gguf': cannot open"));
}

TEST_CASE("GGUF metadata: the rows' keys as a config.json, and what changes the computation refused by name",
          "[hf][gguf]") {
  const auto f = hf::GgufFile::parse(small_llama().bytes(), "t.gguf");
  const hf::Config c = hf::gguf_config(*f);
  CHECK(c.model_type == "llama");
  CHECK(c.describe() == "llama: 2 layers, 2 heads (1 key/value), hidden 8, context 16, vocab 5");
  CHECK((c.num_key_value_heads == 1 && c.head_dim == 4 && c.intermediate_size == 12));
  CHECK((c.rope_theta == 500.0 && c.norm_eps == Approx(1e-6) && c.tie_word_embeddings));
  for (const char* arch : {"qwen2", "qwen3"}) {
    const hf::Config q = config_of(small_llama(arch));
    CHECK(q.model_type == arch);
    CHECK(q.qkv_bias == (std::string(arch) == "qwen2"));
    CHECK(q.qk_norm == (std::string(arch) == "qwen3"));
  }
  CHECK_THAT(
      config_error(GgufBuilder().text("general.architecture", "bloom")),
      Catch::Contains(
          "key 'general.architecture': 'bloom' is not read (saccade reads 'llama', 'qwen2', "
          "'qwen3', 'qwen3moe', 'olmoe', 'qwen2moe', 'olmo2', 'granite', 'smollm3', 'gemma', 'gemma2', "
          "'gemma3', 'phi3', 'gptneox', 'stablelm', 'falcon', 'gpt2')"));
  CHECK_THAT(config_error(small_llama("gpt2")),
             Catch::Contains("key 'gpt2.rope.freq_base': not read for 'gpt2'"));
  // rope scaling keys as the converter writes a "linear" or "yarn" rope_type; a factor alone is linear (as
  // llama.cpp reads it); longrope's factors are not in the metadata
  using Type = ops::RopeScaling::Type;
  const hf::Config linear =
      config_of(small_llama().text("llama.rope.scaling.type", "linear").f32("llama.rope.scaling.factor", 2));
  CHECK((linear.rope_scaling.type == Type::Linear && linear.rope_scaling.factor == 2.0));
  CHECK(config_of(small_llama().f32("llama.rope.scaling.factor", 3)).rope_scaling.factor == 3.0);
  CHECK(config_of(small_llama().text("llama.rope.scaling.type", "none")).rope_scaling.type == Type::Default);
  const hf::Config yarn = config_of(small_llama("qwen2")
                                        .text("qwen2.rope.scaling.type", "yarn")
                                        .f32("qwen2.rope.scaling.factor", 4)
                                        .u32("qwen2.rope.scaling.original_context_length", 8)
                                        .f32("qwen2.rope.scaling.yarn_beta_fast", 16)
                                        .f32("qwen2.rope.scaling.yarn_attn_factor", 1.5f));
  CHECK((yarn.rope_scaling.type == Type::Yarn && yarn.rope_scaling.factor == 4.0 &&
         yarn.rope_scaling.original_max_position_embeddings == 8 && yarn.rope_scaling.beta_fast == 16.0 &&
         yarn.rope_scaling.beta_slow == 1.0 && yarn.rope_scaling.attention_factor == 1.5));
  CHECK_THAT(config_error(small_llama().text("llama.rope.scaling.type", "linear")),
             Catch::Contains("key 'llama.rope.scaling.factor': missing"));
  CHECK_THAT(config_error(small_llama().text("llama.rope.scaling.type", "longrope")),
             Catch::Contains("key 'llama.rope.scaling.type': 'longrope' is not read"));
  CHECK_THAT(
      config_error(small_llama().text("llama.rope.scaling.type", "yarn").f32("llama.rope.scaling.factor", 4)),
      Catch::Contains("key 'llama.rope.scaling.original_context_length': missing"));
  CHECK_THAT(config_error(small_llama().f32("llama.rope.scaling.factor", 0.5f)),
             Catch::Contains("key 'llama.rope.scaling.factor': 0.5 is below 1"));
  CHECK_THAT(
      config_error(small_llama().text("llama.rope.scaling.type", "none").f32("llama.rope.scaling.factor", 2)),
      Catch::Contains("key 'llama.rope.scaling.factor': given without a rope scaling type"));
  CHECK_THAT(config_error(small_llama()
                              .f32("llama.rope.scaling.factor", 2)
                              .u32("llama.rope.scaling.original_context_length", 8)),
             Catch::Contains("not read with rope scaling type 'linear'"));
  CHECK_THAT(config_error(small_llama().f32("llama.rope.scaling.yarn_ext_factor", 1)),
             Catch::Contains("key 'llama.rope.scaling.yarn_ext_factor': not read for 'llama'"));
  CHECK_THAT(config_error(small_llama()
                              .f32("llama.rope.scaling.factor", 2)
                              .tensor("rope_freqs.weight", {2}, 0, floats({1, 3}))),
             Catch::Contains("two rope scalings"));
  GgufBuilder falcon_meta;
  falcon_meta.text("general.architecture", "falcon").text("falcon.tensor_data_layout", "other");
  for (const char* k : {"block_count", "context_length", "embedding_length", "feed_forward_length",
                        "attention.head_count", "vocab_size"})
    falcon_meta.u32(std::string("falcon.") + k, std::string(k) == "attention.head_count" ? 2 : 16);
  CHECK_THAT(config_error(falcon_meta),
             Catch::Contains("key 'falcon.tensor_data_layout': 'other' is not read ('jploski'"));
  CHECK_THAT(config_error(small_llama().u32("llama.attention.sliding_window", 4)),
             Catch::Contains("key 'llama.attention.sliding_window'"));
  // a float32 reads as its shortest decimal; a subnormal one too (not an exception of the decimal's parse)
  const float tiny = 1e-45f;
  CHECK(config_of(small_llama("llama", "", 0, tiny)).norm_eps ==
        Approx(1e-45));  // the float 1.4013e-45's shortest decimal
  // a rotary base at or below 1 (whose frequencies would not fall) is refused here, naming the file, not
  // later by the model's RotaryEmbedding (found by the fuzzer: regressions/gguf/rope_base_subnormal)
  for (const float theta : {tiny, 1.0f, 0.5f})
    CHECK_THAT(config_error(small_llama("llama", "", 0, 1e-6f, theta)),
               Catch::Contains("t.gguf") && Catch::Contains("key 'llama.rope.freq_base'") &&
                   Catch::Contains("is not a finite rotary base above 1"));
  // an infinite float (which a config.json cannot say) is refused, not written into the config as null
  CHECK_THAT(
      config_error(small_llama().f32("llama.rope.scaling.factor", std::numeric_limits<float>::infinity())),
      Catch::Contains("key 'llama.rope.scaling.factor': inf is not a finite positive number"));
  CHECK_THAT(config_error(small_llama("llama", "rope.dimension_count", 2)),
             Catch::Contains("partial rotation is read for 'phi3', 'gptneox' and 'stablelm' only"));
  // rope_freqs.weight: Llama 3's scaling (factor 3 for the slow frequency: an original context of 32 to 128
  // gives it), or factors no Llama 3 scaling gives (the fast frequency scaled, the slow one not), or another
  // row
  const hf::Config scaled = config_of(small_llama().tensor("rope_freqs.weight", {2}, 0, floats({1, 3})));
  CHECK(scaled.rope_scaling.type == ops::RopeScaling::Type::Llama3);
  CHECK((scaled.rope_scaling.factor == 3.0 && scaled.rope_scaling.original_max_position_embeddings == 32));
  CHECK_THAT(
      config_error(small_llama().tensor("rope_freqs.weight", {2}, 0, floats({2, 1}))),
      Catch::Contains("tensor 'rope_freqs.weight' holds factors that Llama 3's rope scaling (factor 2"));
  CHECK_THAT(config_error(small_llama().tensor("rope_freqs.weight", {3}, 0, floats({1, 1, 1}))),
             Catch::Contains("of shape [3] (need 2 floats"));
  CHECK_THAT(config_error(small_llama("qwen2").tensor("rope_freqs.weight", {2}, 0, floats({1, 1}))),
             Catch::Contains("tensor 'rope_freqs.weight' is not read for 'qwen2'"));
  GgufBuilder missing;
  missing.text("general.architecture", "llama").u32("llama.embedding_length", 8).u32("llama.vocab_size", 5);
  CHECK_THAT(config_error(missing), Catch::Contains("key 'llama.attention.head_count': missing"));
  CHECK_THAT(
      config_error(GgufBuilder().text("general.architecture", "llama").text("llama.embedding_length", "8")),
      Catch::Contains("key 'llama.embedding_length': not an integer"));
  // the relations load_config checks, on the metadata
  CHECK_THAT(config_error(small_llama("llama", "attention.head_count_kv", 3)),
             Catch::Contains("hf::load_config"));
}

TEST_CASE("GgufWeights: Hugging Face names, and a llama file's q and k rows back in Hugging Face's order",
          "[hf][gguf]") {
  // q: 2 heads of 4 rows (ggml's order: within a head, rows (i, j) for i < 2, j < 2 at 2i + j), 3 columns
  std::vector<float> q(8 * 3), k(4 * 3);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i / 3);  // each row holds its index
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>(i / 3);
  for (const std::string arch : {"llama", "qwen2"}) {
    GgufBuilder g = small_llama(arch);
    g.tensor("blk.1.attn_q.weight", {3, 8}, 0, floats(q))
        .tensor("blk.1.attn_k.weight", {3, 4}, 0, floats(k))
        .tensor("blk.0.ffn_up.weight", {3, 4}, 0, floats(k))
        .tensor("token_embd.weight", {8, 5}, 0, floats(std::vector<float>(40, 1.0f)))
        .tensor("blk.0.attn_extra.weight", {2}, 0, floats({1, 2}));
    const auto f = hf::GgufFile::parse(g.bytes(), "t.gguf");
    const hf::GgufWeights w(*f, hf::gguf_config(*f));
    CHECK(w.names() == std::vector<std::string>{"model.layers.1.self_attn.q_proj.weight",
                                                "model.layers.1.self_attn.k_proj.weight",
                                                "model.layers.0.mlp.up_proj.weight",
                                                "model.embed_tokens.weight", "blk.0.attn_extra.weight"});
    CHECK(w.shape("model.layers.1.self_attn.q_proj.weight") == Shape({8, 3}));
    const Tensor wq = w.read("model.layers.1.self_attn.q_proj.weight");
    const Tensor wk = w.read("model.layers.1.self_attn.k_proj.weight");
    // Hugging Face row h·4 + j·2 + i was ggml's row h·4 + 2i + j (convert_hf_to_gguf's LlamaModel.permute)
    const std::vector<float> want_q = arch == "llama" ? std::vector<float>{0, 2, 1, 3, 4, 6, 5, 7}
                                                      : std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7};
    for (int r = 0; r < 8; ++r) CHECK(wq.data<float>()[r * 3 + 2] == want_q[static_cast<size_t>(r)]);
    const std::vector<float> want_k =
        arch == "llama" ? std::vector<float>{0, 2, 1, 3} : std::vector<float>{0, 1, 2, 3};
    for (int r = 0; r < 4; ++r) CHECK(wk.data<float>()[r * 3] == want_k[static_cast<size_t>(r)]);
    CHECK_THAT(error_of([&] { w.shape("model.norm.weight"); }),
               Catch::Contains("no tensor 'model.norm.weight'"));
  }
}

// ---- the files make_gguf.py wrote from the fixture folders ----

namespace {

std::string gguf_data(const std::string& name) { return hf_data("gguf/" + name); }

// The logits of `model` for the folder fixture's ids.
Tensor logits_of(nn::LlamaForCausalLM& model, const Tensor& ids) {
  NoGradGuard no_grad;
  return model.forward(ids).data();
}

const Tensor& llama_ids() {
  static const nn::Safetensors e = nn::load_safetensors(hf_data("hf_llama_expected.safetensors"));
  return e.tensors.at("ids");
}

// The folder's model with every matrix rounded to `dtype` and back (the GGUF writer's types).
std::shared_ptr<nn::LlamaForCausalLM> rounded_folder(const std::string& folder, DType dtype) {
  auto model = hf::load_llama(hf_data(folder));
  NoGradGuard no_grad;
  for (auto& [name, t] : model->state_dict()) {
    if (t.dim() != 2) continue;  // the norms stay float32 in the file
    const Tensor r = t.to(dtype).to(DType::Float32);
    std::memcpy(t.raw_data(), r.raw_data(), static_cast<size_t>(t.numel()) * 4);
  }
  return model;
}

}  // namespace

TEST_CASE("GGUF files of the Llama fixture load to the folder's logits in f32, f16 and bf16", "[hf][gguf]") {
  const hf::Config folder = hf::load_config(hf_data("hf_llama/config.json"));
  const hf::Config from_gguf = hf::gguf_config(hf::GgufFile(gguf_data("llama_f32.gguf")));
  CHECK(from_gguf.describe() == folder.describe());
  // every switch of the model alike (the config.json each would save)
  CHECK(hf::config_json(hf::llama_hf_config(hf::llama_config(from_gguf))) ==
        hf::config_json(hf::llama_hf_config(hf::llama_config(folder))));
  CHECK(from_gguf.bos_token_id == folder.bos_token_id);
  CHECK(from_gguf.eos_token_id == folder.eos_token_id);
  const Tensor& ids = llama_ids();
  for (const auto& [file, dtype] :
       std::vector<std::pair<std::string, DType>>{{"llama_f32.gguf", DType::Float32},
                                                  {"llama_f16.gguf", DType::Float16},
                                                  {"llama_bf16.gguf", DType::BFloat16}}) {
    CAPTURE(file);
    auto model = hf::load_llama_gguf(gguf_data(file));
    auto want = rounded_folder("hf_llama", dtype);
    CHECK(allclose(logits_of(*model, ids), logits_of(*want, ids), 1e-5, 1e-5));
  }
  // and transformers' greedy continuation, with the KV cache and without
  static const nn::Safetensors e = nn::load_safetensors(hf_data("hf_llama_expected.safetensors"));
  auto model = hf::load_llama_gguf(gguf_data("llama_f32.gguf"));
  saccade::testing::check_greedy(*model, e);
}

TEST_CASE("GGUF: Llama 3's rope scaling, as the converter's rope_freqs.weight, gives transformers' logits",
          "[hf][gguf]") {
  // tests/data/gguf/llama_rope_f32.gguf: hf_llama_rope (rope_type llama3, factor 8, original context 64)
  const nn::Safetensors e = nn::load_safetensors(hf_data("hf_llama_rope_expected.safetensors"));
  const hf::GgufFile file(gguf_data("llama_rope_f32.gguf"));
  const hf::Config c = hf::gguf_config(file);
  CHECK(hf::config_json(hf::llama_hf_config(hf::llama_config(c))) ==
        hf::config_json(
            hf::llama_hf_config(hf::llama_config(hf::load_config(hf_data("hf_llama_rope/config.json"))))));
  auto model = hf::load_llama_gguf(file);
  CHECK(allclose(logits_of(*model, e.tensors.at("ids")), e.tensors.at("logits"), 1e-5, 1e-5));
  saccade::testing::check_greedy(*model, e);
}

TEST_CASE("GGUF: YaRN rope scaling, as the converter's rope.scaling keys, gives transformers' logits",
          "[hf][gguf]") {
  // tests/data/gguf/llama_yarn_f32.gguf: hf_llama_yarn (rope_type yarn, factor 4, original context 16)
  const nn::Safetensors e = nn::load_safetensors(hf_data("hf_llama_yarn_expected.safetensors"));
  const hf::GgufFile file(gguf_data("llama_yarn_f32.gguf"));
  const hf::Config c = hf::gguf_config(file);
  CHECK(c.rope_scaling == hf::load_config(hf_data("hf_llama_yarn/config.json")).rope_scaling);
  auto model = hf::load_llama_gguf(file);
  CHECK(allclose(logits_of(*model, e.tensors.at("ids")), e.tensors.at("logits"), 1e-5, 1e-5));
  saccade::testing::check_greedy(*model, e);
}

TEST_CASE("GGUF: the Qwen2 fixture's file loads to the folder's logits", "[hf][gguf]") {
  const nn::Safetensors e = nn::load_safetensors(hf_data("hf_qwen2_expected.safetensors"));
  const Tensor& ids = e.tensors.at("ids");
  auto model = hf::load_llama_gguf(gguf_data("qwen2_f32.gguf"));
  CHECK(hf::config_json(hf::llama_hf_config(model->config())) ==
        hf::config_json(hf::llama_hf_config(hf::load_llama(hf_data("hf_qwen2"))->config())));
  CHECK(allclose(logits_of(*model, ids), e.tensors.at("logits"), 1e-5, 1e-5));
}

TEST_CASE("GGUF MoE rows: Mixtral (a llama file with experts), Qwen3-MoE, Qwen2-MoE and OLMoE",
          "[hf][gguf][moe]") {
  // tests/data/gguf/mixtral_f32.gguf and qwen3_moe_f32.gguf: hf_mixtral and hf_qwen3_moe as the converter
  // writes them, each layer's experts stacked into ffn_{gate,up,down}_exps (E, out, in)
  // and qwen2_moe_f32.gguf: hf_qwen2_moe_sparse's shared expert and its gate
  for (const auto& [row, folder] :
       {std::pair{"mixtral", "hf_mixtral"}, std::pair{"qwen3_moe", "hf_qwen3_moe"},
        std::pair{"qwen2_moe", "hf_qwen2_moe_sparse"}}) {
    CAPTURE(row);
    const nn::Safetensors e = nn::load_safetensors(hf_data(fmt::format("{}_expected.safetensors", folder)));
    const hf::GgufFile file(gguf_data(fmt::format("{}_f32.gguf", row)));
    CHECK(hf::gguf_config(file).model_type == row);
    auto model = hf::load_llama_gguf(file);
    CHECK(hf::config_json(hf::llama_hf_config(model->config())) ==
          hf::config_json(hf::llama_hf_config(hf::load_llama(hf_data(folder))->config())));
    CHECK(allclose(logits_of(*model, e.tensors.at("ids")), e.tensors.at("logits"), 1e-5, 1e-5));
    saccade::testing::check_greedy(*model, e);
  }
  // mixtral_q8_0.gguf: the experts' gate and up stacks are Q8_0 (dequantized on load: each expert's blocks
  // are ops::quantize_q8_0's of its rows), down's rows of 24 are F16; the router stays F32
  auto q8 = hf::load_llama_gguf(gguf_data("mixtral_q8_0.gguf"));
  auto folder = hf::load_llama(hf_data("hf_mixtral"));
  const nn::StateDict got = q8->state_dict(), want = folder->state_dict();
  for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
    CAPTURE(proj);
    const std::string name = fmt::format("model.layers.1.mlp.experts.{}", proj);
    const Tensor& w = want.at(name);
    const Tensor rows = w.reshape({w.size(0) * w.size(1), w.size(2)});
    const Tensor rounded = std::string(proj) == "down_proj"
                               ? w.to(DType::Float16).to(DType::Float32)
                               : ops::dequantize_q8_0(ops::quantize_q8_0(rows)).reshape(w.shape());
    CHECK(allclose(got.at(name), rounded, 0, 0));
    CHECK_FALSE(allclose(got.at(name), w, 0, 0));
  }
  CHECK(allclose(got.at("model.layers.1.mlp.gate.weight"), want.at("model.layers.1.mlp.gate.weight"), 0, 0));

  // olmoe_f32.gguf: hf_olmoe, whose rms eps (1e-6) the converter overwrites with 1e-5: the folder's logits
  // with that eps, the top-k weights not renormalised, as llama.cpp's olmoe graph
  const hf::GgufFile olmoe_file(gguf_data("olmoe_f32.gguf"));
  const hf::Config oc = hf::gguf_config(olmoe_file);
  CHECK((oc.model_type == "olmoe" && oc.norm_eps == 1e-5 && !oc.norm_topk_prob && oc.num_experts == 4));
  hf::Config folder_eps = hf::load_config(hf_data("hf_olmoe/config.json"));
  folder_eps.norm_eps = 1e-5;
  auto olmoe = hf::load_llama_gguf(olmoe_file);
  const nn::Safetensors olmoe_expected = nn::load_safetensors(hf_data("hf_olmoe_expected.safetensors"));
  const Tensor& olmoe_ids = olmoe_expected.tensors.at("ids");
  CHECK(allclose(logits_of(*olmoe, olmoe_ids),
                 logits_of(*hf::load_llama(hf_data("hf_olmoe"), folder_eps), olmoe_ids), 1e-6, 1e-6));

  const hf::Config mixtral =
      config_of(small_llama().u32("llama.expert_count", 4).u32("llama.expert_used_count", 2));
  CHECK((mixtral.model_type == "mixtral" && mixtral.num_experts == 4 && mixtral.num_experts_per_tok == 2 &&
         mixtral.norm_topk_prob));
  CHECK_THAT(config_error(small_llama("qwen2").u32("qwen2.expert_count", 4)),
             Catch::Contains("key 'qwen2.expert_count': not read for 'qwen2'"));
  CHECK_THAT(config_error(small_llama("qwen3moe")), Catch::Contains("key 'qwen3moe.expert_count': missing"));
  CHECK_THAT(config_error(small_llama("qwen3moe")
                              .u32("qwen3moe.expert_count", 4)
                              .u32("qwen3moe.expert_used_count", 2)
                              .u32("qwen3moe.expert_feed_forward_length", 6)
                              .u32("qwen3moe.expert_shared_feed_forward_length", 6)),
             Catch::Contains("key 'qwen3moe.expert_shared_feed_forward_length': not read for 'qwen3moe'"));
  CHECK_THAT(config_error(small_llama().u32("llama.expert_used_count", 2)),
             Catch::Contains("key 'llama.expert_used_count': given without llama.expert_count"));
  CHECK_THAT(config_error(small_llama()
                              .u32("llama.expert_count", 4)
                              .u32("llama.expert_used_count", 2)
                              .u32("llama.expert_feed_forward_length", 6)),
             Catch::Contains("not read for a Mixtral"));
  CHECK_THAT(config_error(small_llama().u32("llama.expert_count", 2).u32("llama.expert_used_count", 3)),
             Catch::Contains("num_experts_per_tok"));
  // a stack that is not one: refused by name
  const auto bad = hf::GgufFile::parse(
      small_llama()
          .u32("llama.expert_count", 4)
          .u32("llama.expert_used_count", 2)
          .tensor("blk.0.ffn_gate_exps.weight", {8, 12}, 0, floats(std::vector<float>(96)))
          .bytes(),
      "t.gguf");
  CHECK_THAT(
      error_of([&] { hf::GgufWeights(*bad, hf::gguf_config(*bad)); }),
      Catch::Contains("tensor 'blk.0.ffn_gate_exps.weight' has shape [12, 8] (need a stack of expert"));
}

TEST_CASE(
    "GGUF Gemma, Phi-3, OLMo 2, Granite and GPT-NeoX rows: transformers' logits (Gemma's norms as 1 + w, "
    "Phi-3's fused projections, partial rotation, LongRoPE, OLMo 2's post-norms, Granite's multipliers, "
    "GPT-NeoX's q, k, v blocks)",
    "[hf][gguf]") {
  // tests/data/gguf/gemma_f32.gguf: hf_gemma as GemmaModel writes it (every norm weight + 1, no rope key)
  const nn::Safetensors ge = nn::load_safetensors(hf_data("hf_gemma_expected.safetensors"));
  auto gemma = hf::load_llama_gguf(gguf_data("gemma_f32.gguf"));
  CHECK(gemma->config().model_type == "gemma");
  // 2e-5, as the folder's test (tests/test_hf_llama.cpp): an AVX2-only CPU's kernels put these logits 1.5e-5
  // from transformers'
  CHECK(allclose(logits_of(*gemma, ge.tensors.at("ids")), ge.tensors.at("logits"), 2e-5, 2e-5));
  saccade::testing::check_greedy(*gemma, ge);
  const nn::StateDict gw = gemma->state_dict(), fw = hf::load_llama(hf_data("hf_gemma"))->state_dict();
  for (const char* norm : {"model.layers.0.input_layernorm.weight", "model.norm.weight"}) {
    CAPTURE(norm);
    CHECK(allclose(gw.at(norm), ops::sub(ops::add(fw.at(norm), 1.0), 1.0), 0, 0));  // (1 + w) - 1 in float32
  }
  // tests/data/gguf/phi3_longrope_f32.gguf: hf_phi3_longrope as Phi3MiniModel writes it (rope.dimension_count
  // 12 of 16, rope_factors_long / _short.weight, rope.scaling.original_context_length 16 and attn_factor)
  const nn::Safetensors pe = nn::load_safetensors(hf_data("hf_phi3_longrope_expected.safetensors"));
  const hf::GgufFile file(gguf_data("phi3_longrope_f32.gguf"));
  const hf::Config c = hf::gguf_config(file),
                   folder = hf::load_config(hf_data("hf_phi3_longrope/config.json"));
  CHECK((c.model_type == "phi3" && c.partial_rotary_factor == 0.75));
  CHECK(c.rope_scaling.short_factor == folder.rope_scaling.short_factor);
  CHECK(c.rope_scaling.long_factor == folder.rope_scaling.long_factor);
  CHECK((c.rope_scaling.original_max_position_embeddings == 16 && c.rope_scaling.factor == 4.0));
  CHECK(ops::rotary_attention_factor(c.rope_scaling) ==
        Approx(ops::rotary_attention_factor(folder.rope_scaling)).epsilon(1e-7));
  auto phi3 = hf::load_llama_gguf(file);
  CHECK(allclose(logits_of(*phi3, pe.tensors.at("ids")), pe.tensors.at("logits"), 1e-5, 1e-5));
  CHECK(allclose(logits_of(*phi3, pe.tensors.at("ids_long")), pe.tensors.at("logits_long"), 1e-5, 1e-5));
  saccade::testing::check_greedy(*phi3, pe, {/*cache=*/false});  // re-read past 16, as transformers' Phi-3
  // tests/data/gguf/olmo2_f32.gguf and granite_f32.gguf: OLMo 2's norms after the sublayers, Granite's
  // multipliers as keys
  // and stablelm_f32.gguf, stablelm_parallel_f32.gguf: StableLM's LayerNorms with biases, partial rotation,
  // sequential and parallel layers
  for (const auto& [row, model_type] :
       {std::pair{"olmo2", "olmo2"}, std::pair{"granite", "granite"}, std::pair{"stablelm", "stablelm"},
        std::pair{"stablelm_parallel", "stablelm"}}) {
    CAPTURE(row);
    const nn::Safetensors e = nn::load_safetensors(hf_data(fmt::format("hf_{}_expected.safetensors", row)));
    auto model = hf::load_llama_gguf(gguf_data(fmt::format("{}_f32.gguf", row)));
    CHECK(model->config().model_type == model_type);
    CHECK(model->config().parallel_residual == (std::string(row) == "stablelm_parallel"));
    CHECK(allclose(logits_of(*model, e.tensors.at("ids")), e.tensors.at("logits"), 1e-5, 1e-5));
    saccade::testing::check_greedy(*model, e);
  }
  // tests/data/gguf/gpt_neox_f32.gguf (Pythia's layout) and falcon_40b_f32.gguf (40B's, 2 key/value heads,
  // ln_mlp as attn_norm): q, k, v as blocks in the file ("jploski" for Falcon), read back head by head or
  // group by group; every weight the folder's to the bit
  for (const auto& [row, model_type] :
       {std::pair{"gpt_neox", "gpt_neox"}, std::pair{"falcon_40b", "falcon"}}) {
    CAPTURE(row);
    const nn::Safetensors e = nn::load_safetensors(hf_data(fmt::format("hf_{}_expected.safetensors", row)));
    auto model = hf::load_llama_gguf(gguf_data(fmt::format("{}_f32.gguf", row)));
    CHECK(model->config().model_type == model_type);
    CHECK(allclose(logits_of(*model, e.tensors.at("ids")), e.tensors.at("logits"), 1e-5, 1e-5));
    saccade::testing::check_greedy(*model, e);
    const nn::StateDict folder = hf::load_llama(hf_data(fmt::format("hf_{}", row)))->state_dict();
    for (const auto& [name, t] : model->state_dict()) {
      CAPTURE(name);
      CHECK(allclose(t, folder.at(name), 0, 0));
    }
  }
  const hf::Config falcon = hf::gguf_config(hf::GgufFile(gguf_data("falcon_40b_f32.gguf")));
  CHECK((falcon.num_key_value_heads == 2 && falcon.parallel_norms == 2 && falcon.intermediate_size == 128 &&
         falcon.max_position_embeddings == 2048));
  const hf::Config granite = hf::gguf_config(hf::GgufFile(gguf_data("granite_f32.gguf")));
  const hf::Config granite_folder = hf::load_config(hf_data("hf_granite/config.json"));
  CHECK((granite.embedding_multiplier == granite_folder.embedding_multiplier &&
         granite.residual_multiplier == granite_folder.residual_multiplier &&
         granite.attention_multiplier == granite_folder.attention_multiplier &&
         granite.logits_scaling == granite_folder.logits_scaling));

  auto small_phi3 = [] {
    return small_llama("phi3", "rope.dimension_count", 2).u32("phi3.rope.scaling.original_context_length", 8);
  };
  const hf::Config partial = config_of(small_phi3().u32("phi3.attention.sliding_window", 6));
  CHECK((partial.partial_rotary_factor == 0.5 && partial.sliding_window == 6 &&
         partial.rope_scaling.type == ops::RopeScaling::Type::Default && !partial.pad_token_id));
  CHECK_THAT(config_error(small_phi3().tensor("rope_factors_long.weight", {1}, 0, floats({2}))),
             Catch::Contains("tensor 'rope_factors_long.weight' without 'rope_factors_short.weight'"));
  CHECK_THAT(config_error(small_phi3()
                              .tensor("rope_factors_long.weight", {1}, 0, floats({2}))
                              .tensor("rope_factors_short.weight", {1}, 0, floats({-1}))),
             Catch::Contains("tensor 'rope_factors_short.weight' holds -1 at 0"));
  CHECK_THAT(config_error(small_phi3()
                              .tensor("rope_factors_long.weight", {2}, 0, floats({2, 2}))
                              .tensor("rope_factors_short.weight", {2}, 0, floats({1, 1}))),
             Catch::Contains("of shape [2] (need 1 floats"));
  CHECK_THAT(config_error(small_phi3().f32("phi3.rope.scaling.attn_factor", 1.2f)),
             Catch::Contains("key 'phi3.rope.scaling.attn_factor': given without tensor"));
  CHECK_THAT(config_error(small_llama("phi3", "rope.dimension_count", 3)),
             Catch::Contains("need an even count"));
  CHECK_THAT(config_error(small_llama().tensor("rope_factors_long.weight", {2}, 0, floats({1, 1}))),
             Catch::Contains("tensor 'rope_factors_long.weight' is not read for 'llama'"));
  CHECK_THAT(config_error(small_llama().u32("llama.attention.sliding_window", 4)),
             Catch::Contains("key 'llama.attention.sliding_window': not read for 'llama'"));
}

TEST_CASE("GGUF Q8_0: the file's blocks are kept as they are, and are ops::quantize_q8_0's of the weights",
          "[hf][gguf]") {
  auto kept = hf::load_llama_gguf(gguf_data("llama_q8_0.gguf"), /*keep_q8_0=*/true);
  auto folder = hf::load_llama(hf_data("hf_llama"));
  const auto folder_linears = nn::named_linears(*folder);
  int64_t quantized = 0;
  for (const auto& [name, linear] : nn::named_linears(*kept)) {
    CAPTURE(name);
    if (!linear->weight_q8_0.defined()) continue;
    ++quantized;
    const std::string want_name = name;  // (clang 14 captures no structured binding)
    const auto it = std::find_if(folder_linears.begin(), folder_linears.end(),
                                 [&](const auto& e) { return e.first == want_name; });
    REQUIRE(it != folder_linears.end());
    // gguf's Q8_0 is llama.cpp's quantize_row_q8_0_ref, as ops::quantize_q8_0: the same blocks, in the
    // Hugging Face row order (q and k rows un-permuted)
    const Q8_0Matrix want = ops::quantize_q8_0(it->second->weight.data());
    REQUIRE(want.bytes() == linear->weight_q8_0.bytes());
    CHECK(std::memcmp(want.blocks->data(), linear->weight_q8_0.blocks->data(),
                      static_cast<size_t>(want.bytes())) == 0);
    CHECK(allclose(ops::dequantize_q8_0(linear->weight_q8_0), linear->weight.data(), 0, 0));
  }
  CHECK(quantized == 13);  // 2 layers × 6 and the untied lm_head (down_proj, rows of 48, is F16 in the file)
  // the kept blocks multiply: the logits of a model that dequantized them, quantized again, to 1e-6
  auto dequantized = hf::load_llama_gguf(gguf_data("llama_q8_0.gguf"), /*keep_q8_0=*/false);
  for (const auto& [name, linear] : nn::named_linears(*dequantized))
    CHECK_FALSE(linear->weight_q8_0.defined());
  const Tensor& ids = llama_ids();
  const Tensor plain = logits_of(*dequantized, ids);
  nn::quantize_q8_0(*dequantized, {"down_proj"});  // the file's down_proj is F16
  CHECK(allclose(logits_of(*kept, ids), logits_of(*dequantized, ids), 1e-6, 1e-6));
  // and within 5 % of the range of the float32 folder's logits
  const Tensor f32 = logits_of(*folder, ids);
  const double range = ops::amax(f32, {}, false).item<float>() - ops::amin(f32, {}, false).item<float>();
  CHECK(allclose(plain, f32, 0, 0.05 * range));
}

TEST_CASE(
    "GGUF Q8_0 fused tensors (Phi-3's qkv and gate_up, Falcon's query_key_value) kept, each Linear its rows: "
    "ops::quantize_q8_0's blocks of the folder's weights",
    "[hf][gguf]") {
  const std::pair<const char*, const char*> files[] = {{"phi3_longrope_q8_0.gguf", "hf_phi3_longrope"},
                                                       {"falcon_40b_q8_0.gguf", "hf_falcon_40b"}};
  for (const auto& [file_name, folder_name] : files) {
    CAPTURE(file_name);
    auto kept = hf::load_llama_gguf(gguf_data(file_name), /*keep_q8_0=*/true);
    auto folder = hf::load_llama(hf_data(folder_name));
    const auto folder_linears = nn::named_linears(*folder);
    const bool phi3 = std::string(folder_name) == "hf_phi3_longrope";
    int64_t fused = 0;
    for (const auto& [name, linear] : nn::named_linears(*kept)) {
      CAPTURE(name);
      const bool part = name.ends_with("q_proj") || name.ends_with("k_proj") || name.ends_with("v_proj") ||
                        (phi3 && (name.ends_with("gate_proj") || name.ends_with("up_proj")));
      if (!part) continue;
      ++fused;
      REQUIRE(linear->weight_q8_0.defined());
      const std::string want_name = name;  // (clang 14 captures no structured binding)
      const auto it = std::find_if(folder_linears.begin(), folder_linears.end(),
                                   [&](const auto& e) { return e.first == want_name; });
      REQUIRE(it != folder_linears.end());
      const Q8_0Matrix want = ops::quantize_q8_0(it->second->weight.data());
      REQUIRE((want.rows == linear->weight_q8_0.rows && want.cols == linear->weight_q8_0.cols));
      CHECK(std::memcmp(want.blocks->data(), linear->weight_q8_0.blocks->data(),
                        static_cast<size_t>(want.bytes())) == 0);
    }
    CHECK(fused == (phi3 ? 5 : 3) * kept->config().num_hidden_layers);
    // the kept blocks multiply: the logits of the dequantized model given the same Linears' blocks, to 1e-6
    auto dequantized = hf::load_llama_gguf(gguf_data(file_name), /*keep_q8_0=*/false);
    const auto plain_linears = nn::named_linears(*dequantized);
    for (size_t i = 0; i < plain_linears.size(); ++i)
      if (nn::named_linears(*kept)[i].second->weight_q8_0.defined())
        plain_linears[i].second->weight_q8_0 = ops::quantize_q8_0(plain_linears[i].second->weight.data());
    dequantized->output_q8_0 = kept->output_q8_0;
    const nn::Safetensors want =
        nn::load_safetensors(hf_data(std::string(folder_name) + "_expected.safetensors"));
    const Tensor& ids = want.tensors.at("ids");
    CHECK(allclose(logits_of(*kept, ids), logits_of(*dequantized, ids), 1e-6, 1e-6));
  }
  // a fused tensor's rows that do not add up to its parts' are refused by name
  const hf::GgufFile file(gguf_data("phi3_longrope_q8_0.gguf"));
  const hf::GgufWeights weights(file, hf::gguf_config(file));
  CHECK_THAT(error_of([&] {
               weights.q8_0_parts("model.layers.0.self_attn.qkv_proj.weight", {16, 8});
             }),
             Catch::Contains("hf::GgufWeights::q8_0_parts") && Catch::Contains("not the parts' 16 + 8"));
  CHECK(weights.q8_0("model.layers.0.self_attn.qkv_proj.weight").defined());  // its rows are Phi-3's order
  // Falcon's query_key_value is held group by group here, not as the file's q, k, v blocks: no q8_0()
  const hf::GgufFile falcon(gguf_data("falcon_40b_q8_0.gguf"));
  CHECK_FALSE(hf::GgufWeights(falcon, hf::gguf_config(falcon))
                  .q8_0("transformer.h.0.self_attention.query_key_value.weight")
                  .defined());
}

TEST_CASE("GGUF vocabularies encode and decode as the folders' tokenizers", "[hf][gguf]") {
  const std::string text = file_bytes(hf_data("hf_eval.txt"));
  for (const auto& [file, folder] : std::vector<std::pair<std::string, std::string>>{
           {"llama_f32.gguf", "hf_llama"}, {"gpt2_f32.gguf", "hf_gpt2"}}) {
    CAPTURE(file);
    const auto tok = hf::gguf_tokenizer(hf::GgufFile(gguf_data(file)));
    const auto want = hf::load_tokenizer(hf_data(folder));
    CHECK(tok->vocab_size() == want->vocab_size());
    CHECK(tok->bos_id() == want->bos_id());
    CHECK(tok->eos_id() == want->eos_id());
    const std::vector<int64_t> ids = tok->encode(text, false);
    CHECK(ids == want->encode(text, false));
    CHECK(tok->encode("A fortune 123 <|endoftext|>", true) ==
          want->encode("A fortune 123 <|endoftext|>", true));
    CHECK(tok->decode(ids) == want->decode(ids));
  }
}

TEST_CASE("GGUF SentencePiece vocabularies encode and decode as libsentencepiece", "[hf][gguf]") {
  // tests/data/gguf/spm_vocab.gguf: tests/data/hf_tok/sp/tokenizer.model's pieces, scores and types as
  // convert_hf_to_gguf.py writes them (make_gguf.py; llama.cpp's llama-tokenize gives sentencepiece's ids on
  // it)
  const auto tok = hf::gguf_tokenizer(hf::GgufFile(gguf_data("spm_vocab.gguf")));
  const hf::SentencePieceTokenizer want(hf_data("hf_tok/sp/tokenizer.model"));
  CHECK(tok->vocab_size() == want.vocab_size());
  CHECK(tok->bos_id() == want.bos_id());
  CHECK(tok->eos_id() == want.eos_id());
  const std::string text = file_bytes(hf_data("hf_eval.txt"));
  for (const std::string& s : {text, std::string("Hello  world,\n\ta fortune!  "), std::string(" x"),
                               std::string("caf\xc3\xa9 \xe2\x82\xac 100 \xf0\x9f\x98\x80")}) {
    CAPTURE(s.substr(0, 40));
    for (bool special : {false, true}) {
      const std::vector<int64_t> ids = tok->encode(s, special);
      CHECK(ids == want.encode(s, special));
      // libsentencepiece drops control pieces when decoding; tokenizers (so this tokenizer) writes them out,
      // "<s>" then the text
      CHECK(tok->decode(ids) == (special ? "<s> " : "") + want.decode(ids));
    }
  }
}

TEST_CASE("GGUF vocabularies: what is not read is refused by name", "[hf][gguf]") {
  auto tok_error = [](const GgufBuilder& g) {
    return error_of([&] { hf::gguf_tokenizer(*hf::GgufFile::parse(g.bytes(), "t.gguf")); });
  };
  CHECK_THAT(tok_error(GgufBuilder()), Catch::Contains("key 'tokenizer.ggml.model': missing"));
  CHECK_THAT(tok_error(GgufBuilder().text("tokenizer.ggml.model", "t5")),
             Catch::Contains("key 'tokenizer.ggml.model': 't5' is not read (saccade reads 'gpt2'"));
  CHECK_THAT(tok_error(GgufBuilder()
                           .text("tokenizer.ggml.model", "llama")
                           .strings("tokenizer.ggml.tokens", {"a", "b"})
                           .kv("tokenizer.ggml.scores", 9,
                               GgufBuilder::enc<uint32_t>(6) + GgufBuilder::enc<uint64_t>(1) +
                                   GgufBuilder::enc<float>(0.0f))),
             Catch::Contains("key 'tokenizer.ggml.scores': 1 scores for 2 tokens"));
  CHECK_THAT(
      tok_error(
          GgufBuilder().text("tokenizer.ggml.model", "gpt2").text("tokenizer.ggml.pre", "deepseek-llm")),
      Catch::Contains("'deepseek-llm' is not read (saccade reads 'default', 'gpt-2', 'llama-bpe'"));
  CHECK_THAT(
      tok_error(
          GgufBuilder().text("tokenizer.ggml.model", "gpt2").strings("tokenizer.ggml.tokens", {"a", "a"})),
      Catch::Contains("key 'tokenizer.ggml.tokens[1]': the token 'a' is also id 0"));
  CHECK_THAT(
      tok_error(
          GgufBuilder().text("tokenizer.ggml.model", "gpt2").strings("tokenizer.ggml.tokens", {"a", "\xff"})),
      Catch::Contains("key 'tokenizer.ggml.tokens[1]': not UTF-8"));
  CHECK_THAT(tok_error(GgufBuilder()
                           .text("tokenizer.ggml.model", "gpt2")
                           .strings("tokenizer.ggml.tokens", {"a", "b"})
                           .ints("tokenizer.ggml.token_type", {1})),
             Catch::Contains("1 types for 2 tokens"));
}

TEST_CASE(
    "GGUF Gemma 2 and Gemma 3 rows: the folder's model, with the score scale and window pattern llama.cpp "
    "takes where the file says none",
    "[hf][gguf]") {
  // tests/data/gguf/gemma2_f32.gguf, gemma3_f32.gguf: hf_gemma2 and hf_gemma3_text as Gemma2Model and
  // Gemma3Model write them (four norms a block stored as 1 + w; the soft-caps, the window, Gemma 3's two
  // rope bases and linear scaling). The files hold no query_pre_attn_scalar (the folders' 32; llama.cpp takes
  // head_dim, 16), no layer pattern (hf_gemma3_text's [sliding, sliding, full]; llama.cpp takes every layer
  // but each sixth), and no pad id without a tokenizer.
  const std::pair<const char*, const char*> rows[] = {{"gemma2_f32.gguf", "hf_gemma2"},
                                                      {"gemma3_f32.gguf", "hf_gemma3_text"}};
  for (const auto& [file_name, folder] : rows) {
    CAPTURE(file_name);
    const hf::GgufFile file(gguf_data(file_name));
    const hf::Config c = hf::gguf_config(file);
    // the file's config is the folder's but for what the file cannot say (and, without a tokenizer, the
    // special ids)
    std::string text = file_bytes(hf_data(folder) + "/config.json");
    for (const auto& [from, to] :
         {std::pair{R"("query_pre_attn_scalar": 32)", R"("query_pre_attn_scalar": 16)"},
          std::pair{R"("pad_token_id": 0)", R"("pad_token_id": null)"},
          std::pair{R"("bos_token_id": 2)", R"("bos_token_id": null)"},
          std::pair{R"("eos_token_id": 1)", R"("eos_token_id": null)"}})
      text = saccade::testing::replaced(text, from, to);
    if (std::string(folder) == "hf_gemma3_text")
      text = saccade::testing::replaced(text, R"("full_attention"
  ],)",
                                        R"("sliding_attention"
  ],)");
    CHECK(hf::config_json(c) == hf::config_json(hf::parse_config(text)));
    // the folder's weights under the file's config: the file's logits
    const nn::Safetensors want = nn::load_safetensors(hf_data(std::string(folder) + "_expected.safetensors"));
    const Tensor& ids = want.tensors.at("ids");
    auto from_file = hf::load_llama_gguf(file, c, /*keep_q8_0=*/false, /*strict=*/true);
    auto from_folder = hf::load_llama(hf_data(folder), c, /*strict=*/true);
    CHECK(allclose(logits_of(*from_file, ids), logits_of(*from_folder, ids), 1e-5, 1e-5));
    // and under the folder's own config, transformers' logits: only the scale and pattern differ
    auto as_saved = hf::load_llama(hf_data(folder), hf::load_config(hf_data(folder) + "/config.json"), true);
    CHECK(allclose(logits_of(*as_saved, ids), want.tensors.at("logits"), 1e-5, 1e-5));
  }
  // llama.cpp's score scale: head_dim, but hidden / heads for the 27B models (Gemma 2: 46 layers, Gemma 3:
  // 62); here heads of 4 in a width of 16 over 2 heads: head_dim 4, hidden / heads 8
  auto scale = [](const std::string& arch, uint32_t layers) {
    GgufBuilder g;
    g.text("general.architecture", arch).f32(arch + ".attention.layer_norm_rms_epsilon", 1e-6f);
    const std::pair<const char*, uint32_t> ints[] = {
        {"block_count", layers},     {"context_length", 16},        {"embedding_length", 16},
        {"feed_forward_length", 12}, {"attention.head_count", 2},   {"attention.head_count_kv", 1},
        {"attention.key_length", 4}, {"attention.value_length", 4}, {"vocab_size", 5}};
    for (const auto& [k, v] : ints) g.u32(arch + "." + k, v);
    return config_of(g).attention_multiplier;
  };
  CHECK(scale("gemma2", 2) == Approx(1 / std::sqrt(4.0)));
  CHECK(scale("gemma2", 46) == Approx(1 / std::sqrt(8.0)));
  CHECK(scale("gemma3", 62) == Approx(1 / std::sqrt(8.0)));
  CHECK(scale("gemma3", 46) == Approx(1 / std::sqrt(4.0)));
  // the window layers: every layer but each pattern-th (2 for Gemma 2 and 6 for Gemma 3 unless the key says);
  // a Gemma 3 without a window has none
  const std::string s = "sliding_attention", f = "full_attention";
  CHECK(config_of(small_llama("gemma2", "block_count", 3)).layer_types == std::vector<std::string>{s, f, s});
  CHECK(config_of(small_llama("gemma2", "block_count", 3)).sliding_window == 4096);
  CHECK(config_of(small_llama("gemma3", "block_count", 7).u32("gemma3.attention.sliding_window", 5))
            .layer_types == std::vector<std::string>{s, s, s, s, s, f, s});
  CHECK(config_of(small_llama("gemma3", "block_count", 4)
                      .u32("gemma3.attention.sliding_window", 5)
                      .u32("gemma3.attention.sliding_window_pattern", 2))
            .layer_types == std::vector<std::string>{s, f, s, f});
  const hf::Config none = config_of(small_llama("gemma3", "block_count", 2));
  CHECK((none.layer_types == std::vector<std::string>{f, f} && none.sliding_window == 0));
  // keys of the other row are refused: Gemma 3 has no attention soft-cap, Gemma 2 one rope base
  CHECK_THAT(config_error(small_llama("gemma3").f32("gemma3.attn_logit_softcapping", 50)),
             Catch::Contains("key 'gemma3.attn_logit_softcapping': not read for 'gemma3'"));
  CHECK_THAT(config_error(small_llama("gemma2").f32("gemma2.rope.freq_base_swa", 10000)),
             Catch::Contains("key 'gemma2.rope.freq_base_swa': not read for 'gemma2'"));
}

TEST_CASE(
    "GGUF SmolLM3 row: transformers' logits, every fourth layer without positions as llama.cpp takes it",
    "[hf][gguf]") {
  // tests/data/gguf/smollm3_f32.gguf: hf_smollm3 (no_rope_layers [1, 1, 1, 0]) as SmolLM3Model writes it,
  // LlamaModel's keys and permuted q and k, no key for the layers without positions
  const nn::Safetensors want = nn::load_safetensors(hf_data("hf_smollm3_expected.safetensors"));
  auto model = hf::load_llama_gguf(gguf_data("smollm3_f32.gguf"));
  CHECK(model->config().model_type == "smollm3");
  CHECK(hf::gguf_config(hf::GgufFile(gguf_data("smollm3_f32.gguf"))).no_rope_layers ==
        std::vector<int64_t>{1, 1, 1, 0});
  CHECK(allclose(logits_of(*model, want.tensors.at("ids")), want.tensors.at("logits"), 1e-5, 1e-5));
  saccade::testing::check_greedy(*model, want);
}

#endif  // SACCADE_HAVE_HF
