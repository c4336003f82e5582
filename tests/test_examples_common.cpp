// examples/common: IDX files, captioning scenes, vocabulary and parser, metrics, NW data, PNG pictures,
// progress. Compiled only when examples/common/CMakeLists.txt found its dependencies and defined the macro
// below.
#ifdef SACCADE_HAVE_EXAMPLES_COMMON

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/reduce.h"
#include "examples/common/idx.h"
#include "examples/common/metrics.h"
#include "examples/common/nw_data.h"
#include "examples/common/plots.h"
#include "examples/common/png_io.h"
#include "examples/common/progress.h"
#include "examples/common/scenes.h"
#include "examples/common/step_profiler.h"
#include "helpers.h"

using namespace saccade;
using namespace saccade::examples;
namespace fs = std::filesystem;

namespace {

// A fresh directory per test process (CTest runs each case in its own process), removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("saccade_examples_" + std::to_string(getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

// Writes raw bytes through gzip (to build corrupt IDX files by hand).
void write_gz_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// n 28x28 images; pixel (r, c) of image i is (7 i + r + 2 c) mod 256; label i mod 10.
ImageSet synthetic_set(int64_t n) {
  ImageSet s;
  s.count = n, s.rows = 28, s.cols = 28;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t r = 0; r < 28; ++r)
      for (int64_t c = 0; c < 28; ++c) s.pixels.push_back(static_cast<uint8_t>((7 * i + r + 2 * c) % 256));
    s.labels.push_back(i % 10);
  }
  return s;
}

}  // namespace

// ---- IDX
// ------------------------------------------------------------------------------------------------------

TEST_CASE("idx: gzip round trip of images and labels", "[examples][idx]") {
  TempDir dir;
  std::vector<uint8_t> data(3 * 2 * 4);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 11);
  write_idx_gz(dir.file("a.gz"), {3, 2, 4}, data);
  IdxArray a = read_idx(dir.file("a.gz"), 3);
  REQUIRE(a.dims == std::vector<int64_t>{3, 2, 4});
  REQUIRE(a.data == data);
  // The header on disk is big-endian: 00 00 08 03, then 3, 2, 4 as uint32.
  gzFile f = gzopen(dir.file("a.gz").c_str(), "rb");
  unsigned char head[16];
  REQUIRE(gzread(f, head, 16) == 16);
  gzclose(f);
  REQUIRE(std::vector<unsigned char>(head, head + 16) ==
          std::vector<unsigned char>{0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 4});

  ImageSet src = synthetic_set(4);
  write_idx_gz(dir.file("img.gz"), {4, 28, 28}, src.pixels);
  std::vector<uint8_t> labels = {9, 0, 3, 7};
  write_idx_gz(dir.file("lab.gz"), {4}, labels);
  ImageSet set = load_idx_image_set(dir.file("img.gz"), dir.file("lab.gz"));
  REQUIRE(set.count == 4);
  REQUIRE(set.rows == 28);
  REQUIRE(set.cols == 28);
  REQUIRE(set.pixels == src.pixels);
  REQUIRE(set.labels == std::vector<int64_t>{9, 0, 3, 7});
  Tensor images = set.images_tensor();
  REQUIRE(images.shape() == Shape{4, 28, 28});
  REQUIRE(images.dtype() == DType::Float32);
  // image 2, row 5, col 3: (14 + 5 + 6) / 255
  REQUIRE(images.select(0, 2).select(0, 5).select(0, 3).item<float>() == Approx(25.0 / 255.0));
  REQUIRE(set.images_tensor(false).select(0, 2).select(0, 5).select(0, 3).item<float>() == 25.0f);
  Tensor lab = set.labels_tensor();
  REQUIRE(lab.dtype() == DType::Int64);
  REQUIRE(lab.to_vector<int64_t>() == std::vector<int64_t>{9, 0, 3, 7});
}

TEST_CASE("idx: an uncompressed file reads too", "[examples][idx]") {
  TempDir dir;
  write_bytes(dir.file("plain"), {0, 0, 8, 1, 0, 0, 0, 3, 5, 6, 7});
  IdxArray a = read_idx(dir.file("plain"));
  REQUIRE(a.dims == std::vector<int64_t>{3});
  REQUIRE(a.data == std::vector<uint8_t>{5, 6, 7});
}

TEST_CASE("idx: corrupt files throw naming the file", "[examples][idx]") {
  TempDir dir;
  std::string p = dir.file("bad.gz");
  REQUIRE_THROWS_SACCADE(read_idx(dir.file("missing.gz")), "missing.gz");
  write_gz_bytes(p, {0, 1, 8, 1, 0, 0, 0, 1, 42});
  REQUIRE_THROWS_SACCADE(read_idx(p), "bad magic");
  REQUIRE_THROWS_SACCADE(read_idx(p), p);
  write_gz_bytes(p, {0, 0, 0x0D, 1, 0, 0, 0, 1, 0, 0, 0, 0});
  REQUIRE_THROWS_SACCADE(read_idx(p), "element type 0x0d");
  write_gz_bytes(p, {0, 0, 8, 2, 0, 0, 0, 2});
  REQUIRE_THROWS_SACCADE(read_idx(p), "file ends early while reading the dimension sizes");
  write_gz_bytes(p, {0, 0, 8, 1, 0, 0, 0, 0});
  REQUIRE_THROWS_SACCADE(read_idx(p), "dimension 0 has size 0");
  write_gz_bytes(p, {0, 0, 8, 1, 0, 0, 0, 10, 1, 2, 3, 4, 5});
  REQUIRE_THROWS_SACCADE(read_idx(p), "file ends early while reading the data");
  write_gz_bytes(p, {0, 0, 8, 1, 0, 0, 0, 2, 1, 2, 3});
  REQUIRE_THROWS_SACCADE(read_idx(p), "longer than its header declares");
  write_gz_bytes(p, {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 9});
  REQUIRE_THROWS_SACCADE(read_idx(p, 1), "expected 1 dimensions, the file has 3");
  write_gz_bytes(p, {0, 0, 8, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff});
  REQUIRE_THROWS_SACCADE(read_idx(p, 1), "ends early");  // 2^32 - 1 declared, 5 bytes present

  // A valid gzip file whose CRC-32 trailer (bytes -8..-5) is damaged.
  write_idx_gz(p, {2, 3}, {1, 2, 3, 4, 5, 6});
  std::vector<uint8_t> bytes = read_bytes(p);
  bytes[bytes.size() - 8] ^= 0xff;
  write_bytes(p, bytes);
  REQUIRE_THROWS_SACCADE(read_idx(p), "corrupt gzip");
}

TEST_CASE("idx: image sets check counts labels and splits", "[examples][idx]") {
  TempDir dir;
  write_idx_gz(dir.file("img.gz"), {2, 28, 28}, std::vector<uint8_t>(2 * 28 * 28, 0));
  write_idx_gz(dir.file("lab3.gz"), {3}, {1, 2, 3});
  REQUIRE_THROWS_SACCADE(load_idx_image_set(dir.file("img.gz"), dir.file("lab3.gz")), "holds 2 images but");
  write_idx_gz(dir.file("lab.gz"), {2}, {1, 10});
  REQUIRE_THROWS_SACCADE(load_idx_image_set(dir.file("img.gz"), dir.file("lab.gz")), "label 10 at index 1");
  REQUIRE_THROWS_SACCADE(load_idx_image_set(dir.file("lab.gz"), dir.file("lab.gz")), "expected 3 dimensions");
  REQUIRE_THROWS_SACCADE(load_fashion_mnist("test", dir.path.string()), "unknown split 'test'");
  REQUIRE_THROWS_SACCADE(load_fashion_mnist("t10k", dir.path.string()), "t10k-images-idx3-ubyte.gz");
  REQUIRE_THROWS_SACCADE(write_idx_gz(dir.file("x.gz"), {2, 2}, {1, 2, 3}), "hold 4 elements, data has 3");
}

// ---- vocabulary, captions, parsing
// ----------------------------------------------------------------------------

TEST_CASE("scenes: vocabulary encode and decode", "[examples][scenes]") {
  Vocab v;
  REQUIRE(v.size() == 19);
  const char* order[] = {"<pad>", "<bos>",   "<eos>",   "top",      "bottom", "left", "right",
                         "and",   "t-shirt", "trouser", "pullover", "dress",  "coat", "sandal",
                         "shirt", "sneaker", "bag",     "ankle",    "boot"};
  for (int64_t i = 0; i < 19; ++i) {
    REQUIRE(v.token(i) == order[i]);
    REQUIRE(v.id(order[i]) == i);
  }
  REQUIRE(v.class_first_token(9) == 17);
  REQUIRE(v.class_first_token(0) == 8);
  std::vector<int64_t> ids = v.encode("top left sneaker and bottom right ankle boot");
  REQUIRE(ids == std::vector<int64_t>{3, 5, 15, 7, 4, 6, 17, 18});
  REQUIRE(v.decode({1, 3, 5, 15, 7, 4, 6, 17, 18, 2, 0, 0}) ==
          "top left sneaker and bottom right ankle boot");
  REQUIRE(v.decode({1, 3, 6, 16, 2, 3, 5}) == "top right bag");  // stops at <eos>
  REQUIRE(Vocab::strip({1, 3, 0, 6, 2, 9}) == std::vector<int64_t>{3, 6});
  REQUIRE_THROWS_SACCADE(v.encode("top left hat"), "Vocab::id: 'hat'");
  REQUIRE_THROWS_SACCADE(v.token(19), "Vocab::token: id 19");
  REQUIRE_THROWS_SACCADE(v.decode({3, -1}), "Vocab::token");
}

TEST_CASE("scenes: caption text names items in reading order", "[examples][scenes]") {
  REQUIRE(caption_text({{0, 7}, {3, 9}}) == "top left sneaker and bottom right ankle boot");
  REQUIRE(caption_text({{1, 0}, {2, 3}}) == "top right t-shirt and bottom left dress");
  REQUIRE(caption_text({{0, 1}, {1, 2}, {2, 4}, {3, 5}}) ==
          "top left trouser and top right pullover and bottom left coat and bottom right sandal");
  REQUIRE(caption_text({{2, 6}}) == "bottom left shirt");
  REQUIRE_THROWS_SACCADE(caption_text({}), "caption_text");
  REQUIRE_THROWS_SACCADE(caption_text({{3, 1}, {0, 1}}), "reading order");
  REQUIRE_THROWS_SACCADE(caption_text({{1, 1}, {1, 2}}), "reading order");
  REQUIRE_THROWS_SACCADE(caption_text({{0, 10}}), "label 10");
  REQUIRE_THROWS_SACCADE(caption_text({{4, 1}}), "cell 4");
}

TEST_CASE("scenes: parse_caption reads generated tokens back", "[examples][scenes]") {
  Vocab v;
  // <bos> top left sneaker and bottom right ankle boot <eos> <pad>
  //   0    1   2     3     4    5      6     7     8    9     10
  ParsedCaption p = parse_caption({1, 3, 5, 15, 7, 4, 6, 17, 18, 2, 0}, v);
  REQUIRE(p.well_formed);
  REQUIRE(p.items.size() == 2);
  REQUIRE((p.items[0].cell == 0 && p.items[0].label == 7 && p.items[0].class_begin == 3 &&
           p.items[0].class_end == 4));
  REQUIRE((p.items[1].cell == 3 && p.items[1].label == 9 && p.items[1].class_begin == 7 &&
           p.items[1].class_end == 9));
  // Without <bos>/<eos> the positions are those of the given sequence.
  ParsedCaption q = parse_caption(v.encode("bottom left bag"), v);
  REQUIRE(q.well_formed);
  REQUIRE(
      (q.items.size() == 1 && q.items[0].cell == 2 && q.items[0].label == 8 && q.items[0].class_begin == 2));
  // A broken chunk is skipped, the rest kept.
  ParsedCaption r = parse_caption(v.encode("top left and top right coat and bottom ankle"), v);
  REQUIRE_FALSE(r.well_formed);
  REQUIRE((r.items.size() == 1 && r.items[0].cell == 1 && r.items[0].label == 4));
  // Out of reading order: items kept, not well formed.
  ParsedCaption s = parse_caption(v.encode("bottom right bag and top left bag"), v);
  REQUIRE_FALSE(s.well_formed);
  REQUIRE(s.items.size() == 2);
  REQUIRE_FALSE(parse_caption(v.encode("top left bag and"), v).well_formed);
  REQUIRE_FALSE(parse_caption(v.encode("top left ankle"), v).well_formed);
  REQUIRE_FALSE(parse_caption(v.encode("top left bag bag"), v).well_formed);
  REQUIRE(parse_caption({2, 3, 5, 16}, v).items.empty());  // ends at the leading <eos>
  REQUIRE_FALSE(parse_caption({}, v).well_formed);
  REQUIRE_THROWS_SACCADE(parse_caption({3, 99}, v), "Vocab::token: id 99");
}

// ---- scene generation
// -----------------------------------------------------------------------------------------

TEST_CASE("scenes: images tokens and items agree", "[examples][scenes]") {
  ImageSet src = synthetic_set(23);
  Vocab v;
  const char* where[] = {"top left", "top right", "bottom left", "bottom right"};
  SceneBatch batch = SceneGenerator(src, 5).next_batch(64);
  REQUIRE(batch.images.shape() == Shape{64, 1, 56, 56});
  REQUIRE(batch.tokens.shape() == Shape{64, kMaxCaptionTokens});
  REQUIRE(batch.tokens.dtype() == DType::Int64);
  std::vector<float> img = batch.images.to_vector<float>();
  std::vector<int64_t> tok = batch.tokens.to_vector<int64_t>(), len = batch.lengths.to_vector<int64_t>();
  for (int64_t b = 0; b < 64; ++b) {
    const Scene& s = batch.scenes[b];
    REQUIRE((s.items.size() >= 1 && s.items.size() <= 4 && s.source_index.size() == s.items.size()));
    std::string expected;
    std::vector<int> holder(4, -1);
    for (size_t i = 0; i < s.items.size(); ++i) {
      REQUIRE((i == 0 || s.items[i].cell > s.items[i - 1].cell));
      REQUIRE(s.items[i].label == src.labels[s.source_index[i]]);
      holder[s.items[i].cell] = static_cast<int>(s.source_index[i]);
      expected += (i ? " and " : "") + std::string(where[s.items[i].cell]) + " " +
                  std::string(kClassNames[s.items[i].label]);
    }
    REQUIRE(batch.captions[b] == expected);
    for (int64_t r = 0; r < 56; ++r)
      for (int64_t c = 0; c < 56; ++c) {
        int cell = (r >= 28 ? 2 : 0) + (c >= 28 ? 1 : 0), i = holder[cell];
        float want = i < 0 ? 0.0f : static_cast<float>((7 * i + r % 28 + 2 * (c % 28)) % 256) / 255.0f;
        REQUIRE(img[(b * 56 + r) * 56 + c] == Approx(want));
      }
    std::vector<int64_t> row(tok.begin() + b * kMaxCaptionTokens, tok.begin() + (b + 1) * kMaxCaptionTokens);
    std::vector<int64_t> words = v.encode(expected);
    REQUIRE(len[b] == static_cast<int64_t>(words.size()) + 2);
    REQUIRE(row[0] == Vocab::kBos);
    REQUIRE(std::equal(words.begin(), words.end(), row.begin() + 1));
    REQUIRE(row[words.size() + 1] == Vocab::kEos);
    REQUIRE(std::all_of(row.begin() + static_cast<int64_t>(words.size()) + 2, row.end(),
                        [](int64_t t) { return t == Vocab::kPad; }));
    ParsedCaption p = parse_caption(row, v);
    REQUIRE(p.well_formed);
    REQUIRE(p.items.size() == s.items.size());
    for (size_t i = 0; i < s.items.size(); ++i)
      REQUIRE((p.items[i].cell == s.items[i].cell && p.items[i].label == s.items[i].label));
  }
}

TEST_CASE("scenes: the same seed gives the same scenes", "[examples][scenes]") {
  ImageSet src = synthetic_set(50);
  SceneBatch a = SceneGenerator(src, 42).next_batch(16), b = SceneGenerator(src, 42).next_batch(16);
  SceneBatch c = SceneGenerator(src, 43).next_batch(16);
  REQUIRE(a.captions == b.captions);
  REQUIRE(saccade::testing::allclose(a.images, b.images, 0, 0));
  REQUIRE(a.tokens.to_vector<int64_t>() == b.tokens.to_vector<int64_t>());
  REQUIRE(a.captions != c.captions);
  SceneBatch t = make_test_scenes(src, 16);
  REQUIRE(t.captions == SceneGenerator(src, kTestSceneSeed).next_batch(16).captions);
  // Batches continue the stream: two batches of 8 are one batch of 16.
  SceneGenerator g(src, 42);
  SceneBatch first = g.next_batch(8), second = g.next_batch(8);
  REQUIRE(std::equal(first.captions.begin(), first.captions.end(), a.captions.begin()));
  REQUIRE(std::equal(second.captions.begin(), second.captions.end(), a.captions.begin() + 8));
}

TEST_CASE("scenes: the generator follows its documented algorithm", "[examples][scenes]") {
  // The algorithm in scenes.h, written out again: u(n) by rejection on std::mt19937_64.
  ImageSet src = synthetic_set(37);
  std::mt19937_64 rng(7);
  auto u = [&](uint64_t n) {
    uint64_t threshold = (~n + 1) % n;  // 2^64 mod n
    for (;;)
      if (uint64_t x = rng(); x >= threshold) return x % n;
  };
  SceneGenerator gen(src, 7);
  for (int s = 0; s < 200; ++s) {
    auto k = static_cast<size_t>(1 + u(4));
    std::vector<int> c = {0, 1, 2, 3};
    for (size_t i = 0; i < k; ++i) std::swap(c[i], c[i + u(4 - i)]);
    std::sort(c.begin(), c.begin() + static_cast<int64_t>(k));
    Scene scene = gen.next_scene();
    REQUIRE(scene.items.size() == k);
    for (size_t i = 0; i < k; ++i) {
      auto index = static_cast<int64_t>(u(37));
      REQUIRE(scene.items[i].cell == c[i]);
      REQUIRE(scene.source_index[i] == index);
    }
  }
}

TEST_CASE("scenes: counts and cells are spread evenly", "[examples][scenes]") {
  ImageSet src = synthetic_set(10);
  SceneGenerator gen(src, 1);
  std::map<size_t, int> counts;
  std::map<std::vector<int>, int> subsets_of_two;
  for (int s = 0; s < 8000; ++s) {
    Scene scene = gen.next_scene();
    ++counts[scene.items.size()];
    if (scene.items.size() == 2) ++subsets_of_two[{scene.items[0].cell, scene.items[1].cell}];
  }
  for (size_t k = 1; k <= 4; ++k) REQUIRE(std::abs(counts[k] - 2000) < 150);  // 2000 +- 3.9 sd
  REQUIRE(subsets_of_two.size() == 6);
  for (auto& [cells, n] : subsets_of_two) REQUIRE(std::abs(n - counts[2] / 6) < 80);
}

TEST_CASE("scenes: bad sources and indices throw", "[examples][scenes]") {
  ImageSet small;
  small.count = 1, small.rows = 14, small.cols = 14, small.pixels.resize(196), small.labels = {0};
  REQUIRE_THROWS_SACCADE(SceneGenerator(small, 0), "28x28");
  ImageSet src = synthetic_set(3);
  REQUIRE_THROWS_SACCADE(SceneGenerator(src, 0).next_batch(0), "batch_size");
  REQUIRE_THROWS_SACCADE(render_scenes(src, {Scene{{{0, 1}}, {3}}}), "image index 3 out of range");
  REQUIRE_THROWS_SACCADE(render_scenes(src, {Scene{{{0, 1}}, {}}}), "1 items but 0 indices");
}

// ---- metrics
// --------------------------------------------------------------------------------------------------

TEST_CASE("metrics: exact match and BLEU on hand-computed cases", "[examples][metrics]") {
  REQUIRE(exact_match_rate({{1, 2}, {3}, {4, 5}}, {{1, 2}, {3, 4}, {4, 5}}) == Approx(2.0 / 3.0));
  std::vector<TokenSeq> corpus = {{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11}};
  REQUIRE(corpus_bleu(corpus, corpus) == Approx(1.0));
  // "a b c d e" vs "a b c d f": p1 = 4/5, p2 = 3/4, p3 = 2/3, p4 = 1/2, c = r = 5 (BP = 1);
  // BLEU = (4/5 * 3/4 * 2/3 * 1/2)^(1/4) = (1/5)^(1/4) = 0.668740305.
  REQUIRE(corpus_bleu({{1, 2, 3, 4, 5}}, {{1, 2, 3, 4, 6}}) == Approx(0.668740305));
  // Papineni's clipping example, "the the the the the the the" vs "the cat is on the mat": unigram precision
  // 2/7, c = 7 > r = 6 so BP = 1: BLEU-1 = 2/7.
  REQUIRE(corpus_bleu({{1, 1, 1, 1, 1, 1, 1}}, {{1, 2, 3, 4, 1, 5}}, 1) == Approx(2.0 / 7.0));
  // Corpus-level brevity penalty: all n-grams match (p_n = 1) but c = 4 + 5 = 9 < r = 6 + 5 = 11:
  // BLEU = exp(1 - 11/9) = exp(-2/9) = 0.800737403. (Averaging sentence BLEUs would give (0.60653 + 1) / 2.)
  REQUIRE(corpus_bleu({{1, 2, 3, 4}, {7, 8, 9, 10, 11}}, {{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11}}) ==
          Approx(0.800737403));
  // No smoothing: a candidate without any matching 4-gram scores 0, as does an empty corpus.
  REQUIRE(corpus_bleu({{1, 2, 3}}, {{1, 2, 3}}) == 0.0);
  REQUIRE(corpus_bleu({{}}, {{1, 2}}) == 0.0);
  REQUIRE_THROWS_SACCADE(corpus_bleu({{1}}, {{1}, {2}}), "corpus_bleu: 1 candidates but 2 references");
  REQUIRE_THROWS_SACCADE(corpus_bleu({}, {}), "corpus_bleu: no sentences");
  REQUIRE_THROWS_SACCADE(corpus_bleu({{1}}, {{1}}, 0), "max_n");
  REQUIRE_THROWS_SACCADE(exact_match_rate({{1}}, {}), "exact_match_rate");
}

TEST_CASE("metrics: item accuracy counts ground-truth items found", "[examples][metrics]") {
  Vocab v;
  std::vector<std::vector<SceneItem>> truth = {{{0, 7}, {3, 9}}, {{1, 2}}, {{2, 8}}};
  std::vector<TokenSeq> gen = {
      v.encode("top left sneaker and bottom right bag"),   // 1 of 2
      v.encode("top right pullover and bottom left bag"),  // 1 of 1 (extra item is free)
      v.encode("bottom left and bag")};                    // malformed: 0 of 1
  REQUIRE(item_accuracy(truth, gen, v) == Approx(2.0 / 4.0));
  REQUIRE_THROWS_SACCADE(item_accuracy(truth, {gen[0]}, v), "item_accuracy");
  REQUIRE_THROWS_SACCADE(item_accuracy({{}}, {gen[0]}, v), "no ground-truth items");
}

TEST_CASE("metrics: attention share of a cell on even and odd grids", "[examples][metrics]") {
  Tensor w2 = ops::tensor({0.1, 0.2, 0.3, 0.4}, {2, 2}, DType::Float64);
  REQUIRE(cell_attention_share(w2, 0) == Approx(0.1));
  REQUIRE(cell_attention_share(w2, 3) == Approx(0.4));
  REQUIRE(cell_attention_share(w2.flatten(), 1) == Approx(0.2));
  // 7x7: position 3 spans pixels [24, 32), half in each cell. Uniform weights: each cell gets exactly 1/4.
  Tensor uniform = ops::full({7, 7}, 1.0 / 49.0, DType::Float32);
  for (int c = 0; c < 4; ++c) REQUIRE(cell_attention_share(uniform, c) == Approx(0.25));
  // All weight on the centre position (3, 3): a quarter of its area in each cell.
  Tensor centre = ops::zeros({7, 7}, DType::Float64);
  centre.data<double>()[3 * 7 + 3] = 1;
  REQUIRE(cell_attention_share(centre, 2) == Approx(0.25));
  // All weight on (3, 0): rows [24, 32) x columns [0, 8): half top left, half bottom left.
  Tensor edge = ops::zeros({7, 7}, DType::Float64);
  edge.data<double>()[3 * 7 + 0] = 2;  // not normalised: divided by the total
  REQUIRE(cell_attention_share(edge, 0) == Approx(0.5));
  REQUIRE(cell_attention_share(edge, 2) == Approx(0.5));
  REQUIRE(cell_attention_share(edge, 1) == Approx(0.0));
  REQUIRE_THROWS_SACCADE(cell_attention_share(ops::zeros({3, 4}), 0), "cell_attention_share");
  REQUIRE_THROWS_SACCADE(cell_attention_share(w2, 4), "cell 4");
  REQUIRE_THROWS_SACCADE(cell_attention_share(ops::zeros({2, 2}), 0), "sum to 0");
}

TEST_CASE("metrics: attention localization averages class-word tokens", "[examples][metrics]") {
  Vocab v;
  // top left sneaker and bottom right ankle boot <eos>: class tokens at 2 (cell 0), 6 and 7 (cell 3).
  TokenSeq gen = v.encode("top left sneaker and bottom right ankle boot");
  gen.push_back(Vocab::kEos);
  Tensor att = ops::full({9, 2, 2}, 0.25, DType::Float64);
  double* a = att.data<double>();
  for (int i = 0; i < 4; ++i) a[2 * 4 + i] = i == 0 ? 1.0 : 0.0;              // step 2: all on cell 0 -> 1
  for (int i = 0; i < 4; ++i) a[6 * 4 + i] = (i == 0 || i == 3) ? 0.5 : 0.0;  // step 6: half on cell 3 -> 0.5
  // step 7 stays uniform -> 0.25 on cell 3. Mean = (1 + 0.5 + 0.25) / 3.
  Localization loc = attention_localization({gen}, {att}, v);
  REQUIRE(loc.count == 3);
  REQUIRE(loc.mean == Approx(1.75 / 3.0));
  REQUIRE(attention_localization({gen}, {att.reshape({9, 4})}, v).mean == Approx(1.75 / 3.0));
  REQUIRE(attention_localization({v.encode("top left")}, {att}, v).count == 0);
  REQUIRE_THROWS_SACCADE(attention_localization({gen}, {att.narrow(0, 0, 5)}, v), "only 5 rows");
  REQUIRE_THROWS_SACCADE(attention_localization({gen}, {}, v), "attention_localization");
}

// ---- NW regression data
// ---------------------------------------------------------------------------------------

TEST_CASE("nw_data: seeded sorted samples of 2 sin x + x^0.8", "[examples][nw]") {
  NwData a = make_nw_data(3), b = make_nw_data(3), c = make_nw_data(4);
  REQUIRE(a.x_train.shape() == Shape{50});
  REQUIRE(a.x_test.shape() == Shape{50});
  REQUIRE(saccade::testing::allclose(a.x_train, b.x_train, 0, 0));
  REQUIRE(saccade::testing::allclose(a.y_train, b.y_train, 0, 0));
  REQUIRE_FALSE(saccade::testing::allclose(a.x_train, c.x_train));
  std::vector<float> x = a.x_train.to_vector<float>();
  REQUIRE(std::is_sorted(x.begin(), x.end()));
  REQUIRE((x.front() >= 0 && x.back() < 5));
  std::vector<float> xt = a.x_test.to_vector<float>(), yt = a.y_truth.to_vector<float>();
  REQUIRE(xt[0] == 0.0f);
  REQUIRE(xt[49] == Approx(4.9));
  REQUIRE(yt[0] == 0.0f);
  REQUIRE(yt[10] == Approx(2 * std::sin(1.0) + 1.0));                 // f(1) = 2 sin 1 + 1
  REQUIRE(yt[40] == Approx(2 * std::sin(4.0) + std::pow(4.0, 0.8)));  // f(4) = -1.51360 + 3.03143
  // The noise has standard deviation 0.5 (n = 4000: the sample sd is within 0.5 +- 0.03, ~5 sd).
  NwData big = make_nw_data(9, 4000);
  std::vector<float> bx = big.x_train.to_vector<float>(), by = big.y_train.to_vector<float>();
  double s1 = 0, s2 = 0;
  for (size_t i = 0; i < bx.size(); ++i) {
    double e = by[i] - nw_true_function(bx[i]);
    s1 += e, s2 += e * e;
  }
  double mean = s1 / 4000, sd = std::sqrt(s2 / 4000 - mean * mean);
  REQUIRE(std::abs(mean) < 0.04);
  REQUIRE(std::abs(sd - 0.5) < 0.03);
  REQUIRE_THROWS_SACCADE(make_nw_data(0, 0), "make_nw_data");
}

// ---- pictures
// -------------------------------------------------------------------------------------------------

TEST_CASE("png: write and read back", "[examples][png]") {
  TempDir dir;
  PngImage g{5, 3, 1, {}};
  for (int i = 0; i < 15; ++i) g.pixels.push_back(static_cast<uint8_t>(i * 17));
  write_png(dir.file("g.png"), g);
  PngImage r = read_png(dir.file("g.png"));
  REQUIRE((r.width == 5 && r.height == 3 && r.channels == 1));
  REQUIRE(r.pixels == g.pixels);
  PngImage rgb{2, 2, 3, {255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 9, 9}};
  write_png(dir.file("c.png"), rgb);
  REQUIRE(read_png(dir.file("c.png")).pixels == rgb.pixels);
  // A scene tensor (1, 56, 56) in [0, 1]: pixel = round(255 v), clamped.
  ImageSet src = synthetic_set(4);
  SceneBatch batch = SceneGenerator(src, 0).next_batch(1);
  Tensor img = batch.images.select(0, 0);
  write_png(dir.file("scene.png"), img);
  PngImage s = read_png(dir.file("scene.png"));
  REQUIRE((s.width == 56 && s.height == 56 && s.channels == 1));
  std::vector<float> v = img.to_vector<float>();
  for (size_t i = 0; i < v.size(); ++i) REQUIRE(s.pixels[i] == std::lround(255 * v[i]));
  write_png(dir.file("t.png"), ops::tensor({-1, 0.5, 2}, {1, 3}, DType::Float64));
  REQUIRE(read_png(dir.file("t.png")).pixels == std::vector<uint8_t>{0, 128, 255});
  REQUIRE_THROWS_SACCADE(write_png(dir.file("no/such/dir.png"), g), "no/such/dir.png");
  REQUIRE_THROWS_SACCADE(write_png(dir.file("x.png"), PngImage{2, 2, 1, {1, 2, 3}}), "3 pixel bytes");
  REQUIRE_THROWS_SACCADE(write_png(dir.file("x.png"), PngImage{2, 2, 2, {1, 2, 3, 4, 5, 6, 7, 8}}),
                         "2 channels");
  REQUIRE_THROWS_SACCADE(write_png(dir.file("x.png"), ops::zeros({2, 2, 2})), "write_png");
  REQUIRE_THROWS_SACCADE(write_png(dir.file("x.png"), ops::zeros({2, 2}, DType::Int64)), "float");
  write_bytes(dir.file("fake.png"), {1, 2, 3, 4});
  REQUIRE_THROWS_SACCADE(read_png(dir.file("fake.png")), "fake.png");
  REQUIRE_THROWS_SACCADE(read_png(dir.file("missing.png")), "missing.png");
}

#ifdef SACCADE_HAVE_PLPLOT  // built with PLplot (examples/common/CMakeLists.txt)
TEST_CASE("plots: line plot and heatmaps are PNGs of the asked size", "[examples][plots]") {
  TempDir dir;
  REQUIRE(plots_available());
  NwData d = make_nw_data(0);
  auto vec = [](const Tensor& t) { return t.to_vector<double>(); };
  LinePlot plot{"Nadaraya-Watson", "x", "y", {}, 640, 480};
  plot.series.push_back({vec(d.x_test), vec(d.y_truth), "truth", Series::Style::Line});
  plot.series.push_back({vec(d.x_train), vec(d.y_train), "samples", Series::Style::Points});
  plot.series.push_back({vec(d.x_test), std::vector<double>(50, 1.0), "mean", Series::Style::Dashed});
  write_line_plot(dir.file("nw.png"), plot);
  PngImage p = read_png(dir.file("nw.png"));
  REQUIRE((p.width == 640 && p.height == 480));
  REQUIRE(std::count(p.pixels.begin(), p.pixels.end(), 255) <
          static_cast<int64_t>(p.pixels.size()) * 98 / 100);

  Heatmap h;
  h.weights = ops::rand({4, 6}, DType::Float32);
  h.title = "attention";
  h.row_labels = {"top", "left", "bag", "<eos>"};
  h.col_labels = {"a", "b", "c", "d", "e", "f"};
  h.width = 500, h.height = 400;
  write_heatmap(dir.file("h.png"), h);
  PngImage hp = read_png(dir.file("h.png"));
  REQUIRE((hp.width == 500 && hp.height == 400));
  Heatmap grid;
  grid.weights = ops::rand({2, 3, 5, 7}, DType::Float64);
  write_heatmap(dir.file("grid.png"), grid);
  REQUIRE(read_png(dir.file("grid.png")).width == 800);

  plot.series[0].y.pop_back();
  REQUIRE_THROWS_SACCADE(write_line_plot(dir.file("bad.png"), plot), "write_line_plot");
  REQUIRE_THROWS_SACCADE(write_line_plot(dir.file("bad.png"), LinePlot{}), "no series");
  REQUIRE_THROWS_SACCADE(write_line_plot(dir.file("no/dir/bad.png"), LinePlot{"", "", "", {plot.series[1]}}),
                         "cannot write");
  h.row_labels.pop_back();
  REQUIRE_THROWS_SACCADE(write_heatmap(dir.file("bad.png"), h), "3 row labels for 4 queries");
  h.weights = ops::rand({4});
  REQUIRE_THROWS_SACCADE(write_heatmap(dir.file("bad.png"), h), "(Q, K) or (R, C, Q, K)");
}

namespace {

// Whether pixel (x, y) of an RGB picture is ink: darker than `light` in some channel (colours too), or with
// `black`, in every channel.
bool ink_at(const PngImage& p, int x, int y, int light, bool black) {
  const uint8_t* px = &p.pixels[(static_cast<size_t>(y) * p.width + x) * 3];
  return black ? px[0] < light && px[1] < light && px[2] < light
               : px[0] < light || px[1] < light || px[2] < light;
}

// The first column holding ink over more than `fraction` of the height (a frame's left border), or -1.
int first_ink_column(const PngImage& p, int light, bool black, double fraction) {
  for (int x = 0; x < p.width; ++x) {
    int n = 0;
    for (int y = 0; y < p.height; ++y) n += ink_at(p, x, y, light, black);
    if (n > fraction * p.height) return x;
  }
  return -1;
}

// Nothing within `margin` pixels of the picture's edges: no title or label was cut by them.
void require_clear_edges(const PngImage& p, int light, bool black, int margin = 3) {
  for (int e = 0; e < margin; ++e) {
    for (int y = 0; y < p.height; ++y) {
      REQUIRE_FALSE(ink_at(p, e, y, light, black));
      REQUIRE_FALSE(ink_at(p, p.width - 1 - e, y, light, black));
    }
    for (int x = 0; x < p.width; ++x) {
      REQUIRE_FALSE(ink_at(p, x, e, light, black));
      REQUIRE_FALSE(ink_at(p, x, p.height - 1 - e, light, black));
    }
  }
}

}  // namespace

TEST_CASE("plots: a line plot keeps a long title and long legend labels inside the picture",
          "[examples][plots]") {
  // issue 49 item 23: `gpt curves` with a long --title or --label cut both at the image's edges, and the
  // legend ran off the left edge.
  TempDir dir;
  LinePlot plot;
  plot.title =
      "A long title a user may give: GPT on Debian's fortunes, validation bits per byte at equal "
      "training time, two runs side by side, the second one with the PyTorch twin";
  plot.x_label = "training time (s)", plot.y_label = "validation bits per byte";
  plot.legend_right = true;
  for (int r = 0; r < 2; ++r) {
    Series s;
    s.label = r == 0 ? "saccade, 4 layers, d_model 128, byte tokenizer, 1500 steps of batch 32 on 2 cores, "
                       "OpenBLAS Cooperlake, no dropout, cosine schedule after 30 warmup steps"
                     : "PyTorch twin";
    for (int i = 1; i <= 6; ++i) s.x.push_back(10.0 * i), s.y.push_back(2 + 3 * std::exp(-i / 1.5) + 0.2 * r);
    plot.series.push_back(s);
  }
  plot.width = 900;
  write_line_plot(dir.file("curves.png"), plot);
  PngImage p = read_png(dir.file("curves.png"));
  REQUIRE((p.width == 900 && p.height == 600 && p.channels == 3));
  auto ink = [&](int x, int y) { return ink_at(p, x, y, 160, false); };  // text, and the series' colours
  require_clear_edges(p, 160, false);
  // the title is drawn (ink above the plot's frame, across most of the width), not dropped
  int frame_top = -1;
  for (int y = 0; y < p.height && frame_top < 0; ++y) {
    int n = 0;
    for (int x = 0; x < p.width; ++x) n += ink(x, y);
    if (n > p.width / 2) frame_top = y;
  }
  REQUIRE(frame_top > 10);
  int left = p.width, right = 0;
  for (int y = 0; y < frame_top - 2; ++y)
    for (int x = 0; x < p.width; ++x)
      if (ink(x, y)) left = std::min(left, x), right = std::max(right, x);
  CHECK(right - left > p.width / 2);
  // the legend's frame lies inside the plot's: no ink left of the plot's left border at the legend's rows
  const int frame_left = first_ink_column(p, 160, false, 0.5);
  REQUIRE(frame_left > 20);
  for (int y = frame_top + 2; y < frame_top + 40; ++y)
    for (int x = frame_left - 12; x < frame_left - 2; ++x) CHECK_FALSE(ink(x, y));
}

TEST_CASE("plots: a token's label shows spaces and newlines as symbols (issue 49 item 23)",
          "[examples][plots]") {
  // an "_" for a space sat at the bottom of its row, on top of the next label, and read as a tick mark
  CHECK(token_label(" ") == "\u2423");
  CHECK(token_label(" the\n") == "\u2423the\u21b5");
  CHECK(token_label("a\tb") == "a\u2192b");
  CHECK(token_label("caf\xc3\xa9") == "caf\xc3\xa9");  // a whole UTF-8 character stays
  CHECK(token_label("\xc3") == "?");                   // a byte of one (a byte tokenizer's) does not
  CHECK(token_label(std::string("\x01\xff", 2)) == "??");
}

TEST_CASE("plots: a heatmap of 70 tokens labels every k-th one apart, and keeps its titles inside",
          "[examples][plots]") {
  // issue 38 item 7: the labels of a 70-token gpt sample overlapped into one strip, and the "queries" title
  // was cut at the left edge.
  TempDir dir;
  Heatmap h;
  const int64_t T = 70;
  h.weights = ops::rand({2, 2, T, T}, DType::Float32);
  h.title = "block 1: attention of each of the 4 heads";
  for (int64_t i = 0; i < T; ++i) h.row_labels.push_back(i == 3 ? "WWWWWWWW" : "o");
  h.col_labels = h.row_labels;
  h.width = 900, h.height = 900;
  write_heatmap(dir.file("h.png"), h);
  PngImage p = read_png(dir.file("h.png"));
  REQUIRE((p.width == 900 && p.height == 900 && p.channels == 3));
  auto ink = [&](int x, int y) { return ink_at(p, x, y, 128, true); };
  // Nothing touches the image's edges: the titles and the longest label lie inside it.
  require_clear_edges(p, 128, true);
  // The top-left panel's left border: the first column holding a dark line over a third of the height.
  const int border = first_ink_column(p, 128, true, 1.0 / 3);
  REQUIRE(border > 20);
  // The row labels "o" end half a character left of the border: along that column strip, the ink comes in
  // separate runs (one per label drawn), never one merged strip.
  int runs = 0, longest_run = 0, run = 0;
  for (int y = 0; y < p.height; ++y) {
    bool any = false;
    for (int x = border - 14; x < border - 2; ++x) any = any || ink(x, y);
    run = any ? run + 1 : 0;
    runs += run == 1;
    longest_run = std::max(longest_run, run);
  }
  REQUIRE(runs >= 10);
  REQUIRE(longest_run < 20);

  REQUIRE(label_step(10.0, 3.0) == 1);
  REQUIRE(label_step(1.0, 3.0) == 3);
  REQUIRE(label_step(1.0, 3.5) == 4);
  REQUIRE(label_step(2.0, 0.0) == 1);
  REQUIRE_THROWS_SACCADE(label_step(0.0, 1.0), "label_step");
  REQUIRE_THROWS_SACCADE(label_step(1.0, NAN), "label_step");
}

TEST_CASE("plots: attention overlay puts the heat over the attended cell", "[examples][plots]") {
  TempDir dir;
  // A black scene; word 0 attends to the top left cell, word 1 to the bottom right (2x2 grid).
  Tensor image = ops::zeros({1, 56, 56});
  Tensor att = ops::tensor({1, 0, 0, 0, 0, 0, 0, 1}, {2, 2, 2}, DType::Float32);
  write_attention_overlay(dir.file("o.png"), image, {"bag", "coat"}, att, 120);
  PngImage o = read_png(dir.file("o.png"));
  REQUIRE((o.width == 240 && o.height == 150 && o.channels == 3));
  // Over black, heat shows as red to yellow (r high, b low). Count it per quadrant of each panel's image
  // area, found as the bounding box of the dark-or-red pixels in the upper 80 % of the panel.
  for (int panel = 0; panel < 2; ++panel) {
    int x0 = 1 << 30, x1 = -1, y0 = 1 << 30, y1 = -1;
    auto px = [&](int x, int y) { return &o.pixels[(static_cast<size_t>(y) * o.width + x) * 3]; };
    for (int y = 0; y < o.height * 8 / 10; ++y)
      for (int x = panel * 120; x < (panel + 1) * 120; ++x)
        if (px(x, y)[2] < 60)
          x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    REQUIRE((x1 - x0 > 60 && y1 - y0 > 60));
    int xm = (x0 + x1) / 2, ym = (y0 + y1) / 2;
    auto heat = [&](int xa, int xb, int ya, int yb) {
      int n = 0;
      for (int y = ya; y < yb; ++y)
        for (int x = xa; x < xb; ++x) n += px(x, y)[0] > 120 && px(x, y)[2] < 60;
      return n;
    };
    int top_left = heat(x0, xm, y0, ym), bottom_right = heat(xm, x1, ym, y1);
    if (panel == 0) REQUIRE(top_left > 4 * bottom_right + 100);
    if (panel == 1) REQUIRE(bottom_right > 4 * top_left + 100);
  }
  std::vector<double> up = upsample_bilinear({0, 1, 2, 3}, 2, 4, 4);
  // align_corners = False: output column x samples (x + 0.5) / 2 - 0.5 = -0.25 (clamped 0), 0.25, 0.75, 1.25
  // (1).
  REQUIRE(up[0] == Approx(0.0));
  REQUIRE(up[1] == Approx(0.25));
  REQUIRE(up[2] == Approx(0.75));
  REQUIRE(up[3] == Approx(1.0));
  REQUIRE(up[4 + 1] == Approx(0.25 + 2 * 0.25));  // row 1 samples 0.25 of the way to grid row 1 (+2)
  REQUIRE_THROWS_SACCADE(write_attention_overlay(dir.file("x.png"), image, {"a", "b", "c"}, att), "3 words");
  REQUIRE_THROWS_SACCADE(write_attention_overlay(dir.file("x.png"), image, {}, att), "no words");
  REQUIRE_THROWS_SACCADE(write_attention_overlay(dir.file("x.png"), ops::zeros({3, 4, 4}), {"a"}, att),
                         "image");
}

#else
TEST_CASE("plots: without PLplot the writers skip their files and say so", "[examples][plots]") {
  TempDir dir;
  REQUIRE_FALSE(plots_available());
  Heatmap h;
  h.weights = ops::rand({3, 4}, DType::Float32);
  write_heatmap(dir.file("h.png"), h);
  REQUIRE_FALSE(fs::exists(dir.file("h.png")));
}
#endif  // SACCADE_HAVE_PLPLOT

// ---- progress
// -------------------------------------------------------------------------------------------------

TEST_CASE("step profiler: --profile refuses an unwritable path at once, then profiles steps 2-3",
          "[examples][profiler]") {
  REQUIRE_THROWS_SACCADE(StepProfiler("/nonexistent_saccade_dir/trace.json"), "--profile");
  TempDir dir;
  std::FILE* log = std::tmpfile();
  {
    StepProfiler profile(dir.file("trace.json"), /*skip=*/1, /*steps=*/2, log);
    Variable w(ops::randn({3, 3}), true);
    for (int i = 0; i < 5; ++i) {
      profile.step();
      sum(w * 2.0).backward();
    }
    REQUIRE(fs::exists(dir.file("trace.json")));  // written once steps 2 and 3 were done, not at the end
  }
  std::ifstream in(dir.file("trace.json"));
  nlohmann::json trace = nlohmann::json::parse(in);
  std::map<std::string, int> names;
  // forward ops and backward nodes; the ops a derivative rule calls are counted apart (category
  // op_in_backward: w * 2.0's rule multiplies too)
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e.value("cat", "") != "op_in_backward") ++names[e["name"].get<std::string>()];
  REQUIRE(names["step 2"] == 1);
  REQUIRE(names["step 3"] == 1);
  REQUIRE(names.count("step 1") == 0);
  REQUIRE(names.count("step 4") == 0);
  REQUIRE(names["mul"] == 2);
  REQUIRE(names["MulBackward"] == 2);
  REQUIRE(StepProfiler::png_path("out/trace.json") == "out/trace.png");
  // a trace named .png keeps its name: the summary goes beside it (issue 49: it overwrote the trace)
  REQUIRE(StepProfiler::png_path("out/p3.png") == "out/p3.summary.png");
  REQUIRE_THROWS_SACCADE(StepProfiler(dir.path.string()), "it is a folder");  // refused before any step
  REQUIRE_FALSE(fs::exists(dir.path.string() + ".partial"));
  if (plots_available()) REQUIRE(fs::exists(dir.file("trace.png")));
  std::fclose(log);
}

TEST_CASE("progress: line format and output modes", "[examples][progress]") {
  // 50 of 200 steps: 5 of 20 bar cells, 25 %; 150 steps left at 12.5 steps/s: 12 s.
  REQUIRE(ProgressBar::format_line(50, 200, 0.123456, 12.5) ==
          "step 50/200 [=====>              ]  25%  loss 0.1235  12.5 steps/s  ETA 00:12");
  REQUIRE(ProgressBar::format_line(0, 7200, 2.0, 1.0, 4) ==
          "step 0/7200 [>   ]   0%  loss 2.0000  1.0 steps/s  ETA 2:00:00");
  REQUIRE(ProgressBar::format_line(3, 3, 0.5, 0.0, 4) ==
          "step 3/3 [====] 100%  loss 0.5000  -- steps/s  ETA --");
  // under a time limit the ETA is the sooner limit: 290 s left of the time, 250000 s of a 10^6-step cap
  REQUIRE(ProgressBar::format_line(10, 1000000, 2.0, 4.0, 4, 290.0) ==
          "step 10/1000000 [>   ]   0%  loss 2.0000  4.0 steps/s  ETA 04:50");
  // ... and the step cap when it comes first: 100 steps at 10 steps/s, 300 s of time left
  REQUIRE(ProgressBar::format_line(100, 200, 1.0, 10.0, 4, 300.0) ==
          "step 100/200 [==> ]  50%  loss 1.0000  10.0 steps/s  ETA 00:10");
  auto read_all = [](std::FILE* f) {
    std::fflush(f);
    std::rewind(f);
    std::string s;
    for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
    return s;
  };
  std::FILE* log = std::tmpfile();
  ProgressBar bar(10, 3, log, 0);
  for (int s = 1; s <= 10; ++s) bar.update(s, 1.0 / s);
  bar.finish();
  std::string text = read_all(log);
  std::fclose(log);
  REQUIRE(std::count(text.begin(), text.end(), '\n') == 4);  // steps 3, 6, 9 and the last
  REQUIRE(text.find("step 9/10") != std::string::npos);
  REQUIRE(text.find("step 10/10") != std::string::npos);
  REQUIRE(text.find('\r') == std::string::npos);
  std::FILE* term = std::tmpfile();
  ProgressBar live(10, 3, term, 1);
  for (int s = 1; s <= 10; ++s) live.update(s, 0.5);
  live.finish();
  live.finish();
  std::string shown = read_all(term);
  std::fclose(term);
  REQUIRE(std::count(shown.begin(), shown.end(), '\n') == 1);
  REQUIRE(shown.back() == '\n');
  REQUIRE(shown.find("\rstep 10/10") != std::string::npos);
  REQUIRE_THROWS_SACCADE(ProgressBar(0), "ProgressBar");
  REQUIRE_THROWS_SACCADE(ProgressBar(10, 3, log, 0, 10), "first_step");
}

TEST_CASE("progress: a resumed run counts its steps from where it resumed (issue 49 item 22)",
          "[examples][progress]") {
  std::FILE* log = std::tmpfile();
  {
    // steps 21-30 of a run resumed at step 20, the caller's clock giving 2 s for the 10 steps timed here
    ProgressBar bar(30, 5, log, 0, 20);
    for (int s = 21; s <= 30; ++s) {
      bar.set_train_seconds(0.2 * (s - 20));
      bar.update(s, 1.0);
    }
    bar.finish();
  }
  std::fflush(log);
  std::rewind(log);
  std::string text;
  for (int c; (c = std::fgetc(log)) != EOF;) text += static_cast<char>(c);
  std::fclose(log);
  // the line numbers the steps as the run does (it read "step 10/10" for step 30), and the rate is the
  // steps timed here over the caller's seconds: 5 steps in 1 s, then 10 in 2 s
  CHECK(text.find("step 25/30 [================>   ]  83%  loss 1.0000  5.0 steps/s  ETA 00:01") !=
        std::string::npos);
  CHECK(text.find("step 30/30 [====================] 100%  loss 1.0000  5.0 steps/s  ETA 00:00") !=
        std::string::npos);
  CHECK(text.find("/10 ") == std::string::npos);
}

// ---- the real data (hidden: run with `saccade_tests "[.fashion]"` when the Debian package is installed)
// --------

TEST_CASE("fashion: the real t10k split loads and renders", "[.fashion]") {
  ImageSet t10k = load_fashion_mnist("t10k");
  REQUIRE((t10k.count == 10000 && t10k.rows == 28 && t10k.cols == 28));
  std::vector<int> per_class(10, 0);
  for (int64_t l : t10k.labels) ++per_class[l];
  for (int n : per_class) REQUIRE(n == 1000);
  SceneBatch test = make_test_scenes(t10k, 8);
  const char* out = std::getenv("SACCADE_PICTURES");
  if (out) {
    for (int b = 0; b < 4; ++b) {
      write_png(fmt::format("{}/scene{}.png", out, b), test.images.select(0, b));
      std::fprintf(stderr, "scene%d: %s\n", b, test.captions[b].c_str());
    }
    Vocab v;
    TokenSeq words = v.encode(test.captions[0]);
    std::vector<std::string> names;
    for (int64_t w : words) names.push_back(v.token(w));
    Tensor att = ops::rand({static_cast<int64_t>(words.size()), 7, 7}, DType::Float32);
    write_attention_overlay(std::string(out) + "/overlay.png", test.images.select(0, 0), names, att);
  }
}

#endif  // SACCADE_HAVE_EXAMPLES_COMMON
