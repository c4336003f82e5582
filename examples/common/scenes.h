#pragma once
// The captioning task: 56x56 scenes of 2x2 cells holding Fashion-MNIST items, their captions ("top left
// sneaker and bottom right ankle boot"), the caption vocabulary, and a parser from generated tokens back to
// (cell, class) items. examples/README.md states the task in full.
#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "examples/common/idx.h"
#include "ops/tensor.h"

namespace saccade::examples {

/// Fashion-MNIST's classes, in label order (label i is kClassNames[i]). "ankle boot" is two caption tokens.
inline constexpr std::array<std::string_view, 10> kClassNames = {
    "t-shirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle boot"};
inline constexpr int kNumClasses = 10;
inline constexpr int64_t kCellSize = 28;   ///< a cell is one 28x28 Fashion-MNIST image
inline constexpr int64_t kSceneSize = 56;  ///< a scene is 2x2 cells
inline constexpr int kNumCells =
    4;  ///< cells in reading order: 0 top left, 1 top right, 2 bottom left, 3 bottom right
/// Longest token row: <bos> + 4 items of at most 4 tokens ("bottom right ankle boot") + 3 "and" + <eos>.
inline constexpr int64_t kMaxCaptionTokens = 21;
/// The seed of the fixed test set (make_test_scenes).
inline constexpr uint64_t kTestSceneSeed = 20240229;

/// One item of a scene: the Fashion-MNIST class `label` (0..9) in `cell` (0..3, reading order).
struct SceneItem {
  int cell = 0;
  int label = 0;
  friend bool operator==(const SceneItem&, const SceneItem&) = default;
};

/// "top left", "top right", "bottom left" or "bottom right" for cell 0..3; throws saccade::Error otherwise.
std::string cell_name(int cell);

/// The caption of `items` (given in reading order): "<top|bottom> <left|right> <class>" joined by " and ",
/// e.g. "top left sneaker and bottom right ankle boot". Throws saccade::Error when items is empty, not
/// strictly increasing in cell, or holds a cell or label out of range.
std::string caption_text(const std::vector<SceneItem>& items);

/// The fixed caption vocabulary, ids in this order: <pad> <bos> <eos> top bottom left right and t-shirt
/// trouser pullover dress coat sandal shirt sneaker bag ankle boot (19 tokens).
class Vocab {
 public:
  static constexpr int64_t kPad = 0, kBos = 1, kEos = 2;
  Vocab();
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  /// The id of `token`; throws saccade::Error for a word outside the vocabulary.
  int64_t id(std::string_view token) const;
  /// The word of `id`; throws saccade::Error when id is out of range.
  const std::string& token(int64_t id) const;
  /// Ids of a caption's words (split on spaces; no <bos>/<eos> added). Throws for an unknown word.
  std::vector<int64_t> encode(const std::string& caption) const;
  /// Words of `ids` joined by spaces, after strip(): "<bos> top left bag <eos> <pad>" -> "top left bag".
  std::string decode(const std::vector<int64_t>& ids) const;
  /// The content tokens: drops <bos> and <pad>, stops at the first <eos>.
  static std::vector<int64_t> strip(const std::vector<int64_t>& ids);
  /// The ids of the first token of each class name, by label (for "ankle boot": "ankle").
  int64_t class_first_token(int label) const { return class_first_[label]; }

 private:
  std::vector<std::string> tokens_;
  std::array<int64_t, kNumClasses> class_first_{};
};

/// One item read back from a generated caption: `cell`, `label`, and the positions [class_begin, class_end)
/// of its class name's tokens in the sequence given to parse_caption.
struct ParsedItem {
  int cell = 0;
  int label = 0;
  int64_t class_begin = 0, class_end = 0;
};

/// A generated caption read back as items. `well_formed`: every " and "-separated chunk was an item, there is
/// at least one, and the cells are strictly increasing (reading order).
struct ParsedCaption {
  std::vector<ParsedItem> items;
  bool well_formed = false;
};

/// Reads a generated token sequence back into items: a leading <bos> is skipped, the sequence ends at the
/// first <eos> or <pad>, chunks are separated by "and", and a chunk is an item when it is exactly
/// "<top|bottom> <left|right> <class name>". Chunks that are not are skipped (and well_formed is false).
/// Throws saccade::Error for an id outside the vocabulary.
ParsedCaption parse_caption(const std::vector<int64_t>& ids, const Vocab& vocab);

/// A scene: its items in reading order and, per item, the index of its image in the source ImageSet.
struct Scene {
  std::vector<SceneItem> items;
  std::vector<int64_t> source_index;
};

/// A batch of rendered scenes.
struct SceneBatch {
  Tensor images;   ///< float32 (B, 1, 56, 56), pixel / 255 in [0, 1]; empty cells are 0
  Tensor tokens;   ///< int64 (B, kMaxCaptionTokens): <bos> caption <eos>, then <pad>
  Tensor lengths;  ///< int64 (B): tokens before the padding (caption words + 2)
  std::vector<Scene> scenes;
  std::vector<std::string> captions;
};

/// Draws random scenes from a 28x28 ImageSet, reproducibly: the same seed gives the same scenes on every
/// platform. Per scene, with u(n) = a uniform integer in [0, n) from std::mt19937_64 by rejection (draw x;
/// redraw while x < 2^64 mod n; return x mod n):
///   k = 1 + u(4) items; cells = the first k entries of a partial Fisher-Yates shuffle of (0, 1, 2, 3)
///   (for i < k: swap c[i] with c[i + u(4 - i)]), sorted; then for each cell in reading order an image
///   index u(N), whose label is the item's class.
class SceneGenerator {
 public:
  /// `source` must hold 28x28 images and outlive the generator; throws saccade::Error otherwise (or if
  /// empty).
  SceneGenerator(const ImageSet& source, uint64_t seed);
  Scene next_scene();
  /// The next `batch_size` scenes, rendered.
  SceneBatch next_batch(int64_t batch_size);

 private:
  uint64_t uniform_below(uint64_t n);
  const ImageSet* source_;
  std::mt19937_64 rng_;
};

/// Renders `scenes` (images from `source`) and encodes their captions with the fixed vocabulary. Throws
/// saccade::Error when a source index is out of range or the source images are not 28x28.
SceneBatch render_scenes(const ImageSet& source, const std::vector<Scene>& scenes);

/// The fixed test set: the first `n` scenes of SceneGenerator(t10k, seed). Use the t10k split.
SceneBatch make_test_scenes(const ImageSet& t10k, int64_t n = 1000, uint64_t seed = kTestSceneSeed);

}  // namespace saccade::examples
