#include "examples/common/scenes.h"

#include <algorithm>
#include <sstream>

#include "ops/creation.h"

namespace saccade::examples {

namespace {
constexpr std::array<const char*, 8> kFixedTokens = {"<pad>",  "<bos>", "<eos>", "top",
                                                     "bottom", "left",  "right", "and"};
constexpr int64_t kTop = 3, kBottom = 4, kLeft = 5, kRight = 6, kAnd = 7;

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}
}  // namespace

std::string cell_name(int cell) {
  SACCADE_CHECK(cell >= 0 && cell < kNumCells, "cell_name: cell {} out of range [0, 4)", cell);
  return std::string(cell < 2 ? "top" : "bottom") + (cell % 2 == 0 ? " left" : " right");
}

std::string caption_text(const std::vector<SceneItem>& items) {
  SACCADE_CHECK(!items.empty(), "caption_text: a scene needs at least one item");
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    SACCADE_CHECK(i == 0 || items[i].cell > items[i - 1].cell,
                  "caption_text: items must be in reading order with distinct cells, got cell {} after {}",
                  items[i].cell, items[i - 1].cell);
    SACCADE_CHECK(items[i].label >= 0 && items[i].label < kNumClasses,
                  "caption_text: label {} out of range [0, {})", items[i].label, kNumClasses);
    if (i > 0) out += " and ";
    out += cell_name(items[i].cell) + " " + std::string(kClassNames[items[i].label]);
  }
  return out;
}

Vocab::Vocab() {
  tokens_.assign(kFixedTokens.begin(), kFixedTokens.end());
  for (int c = 0; c < kNumClasses; ++c) {
    class_first_[c] = size();
    for (auto& w : split_words(std::string(kClassNames[c]))) tokens_.push_back(w);
  }
}

int64_t Vocab::id(std::string_view token) const {
  auto it = std::find(tokens_.begin(), tokens_.end(), token);
  SACCADE_CHECK(it != tokens_.end(), "Vocab::id: '{}' is not in the captioning vocabulary", token);
  return it - tokens_.begin();
}

const std::string& Vocab::token(int64_t id) const {
  SACCADE_CHECK(id >= 0 && id < size(), "Vocab::token: id {} out of range [0, {})", id, size());
  return tokens_[static_cast<size_t>(id)];
}

std::vector<int64_t> Vocab::encode(const std::string& caption) const {
  std::vector<int64_t> ids;
  for (auto& w : split_words(caption)) ids.push_back(id(w));
  return ids;
}

std::string Vocab::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (int64_t i : strip(ids)) out += (out.empty() ? "" : " ") + token(i);
  return out;
}

std::vector<int64_t> Vocab::strip(const std::vector<int64_t>& ids) {
  std::vector<int64_t> out;
  for (int64_t i : ids) {
    if (i == kEos) break;
    if (i != kBos && i != kPad) out.push_back(i);
  }
  return out;
}

ParsedCaption parse_caption(const std::vector<int64_t>& ids, const Vocab& vocab) {
  for (int64_t i : ids) vocab.token(i);  // range check
  int64_t end = 0, begin = (!ids.empty() && ids[0] == Vocab::kBos) ? 1 : 0,
          n = static_cast<int64_t>(ids.size());
  for (end = begin; end < n && ids[end] != Vocab::kEos && ids[end] != Vocab::kPad; ++end) {
  }
  ParsedCaption out;
  out.well_formed = true;
  // A class name starting at position p: returns its label and sets `len`, or -1.
  auto class_at = [&](int64_t p, int64_t stop, int64_t& len) {
    for (int c = 0; c < kNumClasses; ++c) {
      auto words = split_words(std::string(kClassNames[c]));
      len = static_cast<int64_t>(words.size());
      if (p + len > stop) continue;
      bool match = true;
      for (int64_t k = 0; k < len && match; ++k) match = ids[p + k] == vocab.class_first_token(c) + k;
      if (match) return c;
    }
    return -1;
  };
  for (int64_t chunk = begin; chunk <= end;) {
    int64_t stop = chunk;
    while (stop < end && ids[stop] != kAnd) ++stop;
    int64_t len = 0;
    bool ok = stop - chunk >= 3 && (ids[chunk] == kTop || ids[chunk] == kBottom) &&
              (ids[chunk + 1] == kLeft || ids[chunk + 1] == kRight);
    int label = ok ? class_at(chunk + 2, stop, len) : -1;
    if (label >= 0 && chunk + 2 + len == stop) {
      int cell = (ids[chunk] == kBottom ? 2 : 0) + (ids[chunk + 1] == kRight ? 1 : 0);
      if (!out.items.empty() && cell <= out.items.back().cell) out.well_formed = false;
      out.items.push_back({cell, label, chunk + 2, stop});
    } else {
      out.well_formed = false;
    }
    chunk = stop + 1;
  }
  if (out.items.empty()) out.well_formed = false;
  return out;
}

SceneGenerator::SceneGenerator(const ImageSet& source, uint64_t seed) : source_(&source), rng_(seed) {
  SACCADE_CHECK(source.rows == kCellSize && source.cols == kCellSize && source.count > 0,
                "SceneGenerator: need a non-empty set of 28x28 images, got {} images of {}x{}", source.count,
                source.rows, source.cols);
}

uint64_t SceneGenerator::uniform_below(uint64_t n) {
  const uint64_t threshold = (0 - n) % n;  // 2^64 mod n: rejecting x below it leaves a multiple of n values
  for (;;) {
    uint64_t x = rng_();
    if (x >= threshold) return x % n;
  }
}

Scene SceneGenerator::next_scene() {
  int k = 1 + static_cast<int>(uniform_below(kNumCells));
  std::array<int, kNumCells> cells = {0, 1, 2, 3};
  for (int i = 0; i < k; ++i) std::swap(cells[i], cells[i + uniform_below(kNumCells - i)]);
  std::sort(cells.begin(), cells.begin() + k);
  Scene scene;
  for (int i = 0; i < k; ++i) {
    int64_t index = static_cast<int64_t>(uniform_below(static_cast<uint64_t>(source_->count)));
    scene.items.push_back({cells[i], static_cast<int>(source_->labels[index])});
    scene.source_index.push_back(index);
  }
  return scene;
}

SceneBatch SceneGenerator::next_batch(int64_t batch_size) {
  SACCADE_CHECK(batch_size > 0, "SceneGenerator::next_batch: batch_size must be positive, got {}",
                batch_size);
  std::vector<Scene> scenes;
  for (int64_t b = 0; b < batch_size; ++b) scenes.push_back(next_scene());
  return render_scenes(*source_, scenes);
}

SceneBatch render_scenes(const ImageSet& source, const std::vector<Scene>& scenes) {
  SACCADE_CHECK(source.rows == kCellSize && source.cols == kCellSize,
                "render_scenes: need 28x28 source images, got {}x{}", source.rows, source.cols);
  const auto B = static_cast<int64_t>(scenes.size());
  SACCADE_CHECK(B > 0, "render_scenes: no scenes given");
  static const Vocab vocab;
  SceneBatch out;
  out.images = ops::zeros({B, 1, kSceneSize, kSceneSize}, DType::Float32);
  out.tokens = ops::full({B, kMaxCaptionTokens}, static_cast<double>(Vocab::kPad), DType::Int64);
  out.lengths = ops::empty({B}, DType::Int64);
  float* img = out.images.data<float>();
  int64_t* tok = out.tokens.data<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    const Scene& s = scenes[b];
    SACCADE_CHECK(s.items.size() == s.source_index.size(),
                  "render_scenes: scene {} has {} items but {} indices", b, s.items.size(),
                  s.source_index.size());
    for (size_t i = 0; i < s.items.size(); ++i) {
      int64_t index = s.source_index[i];
      SACCADE_CHECK(index >= 0 && index < source.count,
                    "render_scenes: scene {}: image index {} out of range [0, {})", b, index, source.count);
      const uint8_t* px = source.image(index);
      int64_t r0 = (s.items[i].cell / 2) * kCellSize, c0 = (s.items[i].cell % 2) * kCellSize;
      for (int64_t r = 0; r < kCellSize; ++r)
        for (int64_t c = 0; c < kCellSize; ++c)
          img[(b * kSceneSize + r0 + r) * kSceneSize + c0 + c] =
              static_cast<float>(px[r * kCellSize + c]) / 255.0f;
    }
    out.captions.push_back(caption_text(s.items));
    std::vector<int64_t> ids = vocab.encode(out.captions.back());
    int64_t* row = tok + b * kMaxCaptionTokens;
    row[0] = Vocab::kBos;
    std::copy(ids.begin(), ids.end(), row + 1);
    row[ids.size() + 1] = Vocab::kEos;
    out.lengths.data<int64_t>()[b] = static_cast<int64_t>(ids.size()) + 2;
  }
  out.scenes = scenes;
  return out;
}

SceneBatch make_test_scenes(const ImageSet& t10k, int64_t n, uint64_t seed) {
  return SceneGenerator(t10k, seed).next_batch(n);
}

}  // namespace saccade::examples
