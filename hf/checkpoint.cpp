#include "hf/checkpoint.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ops/foreach.h"
#include "ops/half.h"
#include "ops/join.h"

namespace saccade::hf {

namespace fs = std::filesystem;

// ---- Weights: the mapped files ----

struct Weights::Shard {
  std::string path;
  nn::SafetensorsHeader header;
  const unsigned char* map = nullptr;
  size_t size = 0;
  ~Shard() {
    if (map) ::munmap(const_cast<unsigned char*>(map), size);
  }
};

namespace {

Error weights_error(const std::string& dir, const std::string& what) {
  return Error(fmt::format("hf::Weights: '{}': {}", dir, what));
}

// The shard files of `dir`: model.safetensors when it is there (as transformers' from_pretrained prefers it),
// else the files model.safetensors.index.json names (each with the tensors the index assigns it).
std::vector<std::pair<std::string, std::set<std::string>>> shard_files(const std::string& dir) {
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(single, ec)) return {{single.string(), {}}};
  if (!fs::exists(index, ec))
    throw weights_error(dir, "neither model.safetensors nor model.safetensors.index.json is there");
  std::ifstream f(index, std::ios::binary);
  std::ostringstream text;
  text << f.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw weights_error(index.string(), fmt::format("not JSON: {}", e.what()));
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw weights_error(index.string(), "no \"weight_map\" object");
  std::map<std::string, std::set<std::string>> files;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string())
      throw weights_error(index.string(),
                          fmt::format("tensor '{}': {} is not a file name", name, file.dump()));
    const std::string f = file.get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
      throw weights_error(index.string(),
                          fmt::format("tensor '{}': '{}' is not a file in the folder", name, f));
    files[f].insert(name);
  }
  std::vector<std::pair<std::string, std::set<std::string>>> out;
  for (auto& [file, names] : files) {
    const fs::path p = fs::path(dir) / file;
    if (!fs::is_regular_file(p, ec))
      throw weights_error(index.string(), fmt::format("names the file '{}' (for '{}'), which is missing",
                                                      file, *names.begin()));
    out.emplace_back(p.string(), std::move(names));
  }
  return out;
}

// The dtypes read_into converts between.
bool is_loadable(DType d) { return d == DType::Float32 || d == DType::BFloat16 || d == DType::Float16; }

float load_one(const unsigned char* p, DType d, size_t i) {
  uint16_t h;
  switch (d) {
    case DType::Float32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
    case DType::BFloat16:
      std::memcpy(&h, p + 2 * i, 2);
      return bf16_bits_to_float(h);
    default:
      std::memcpy(&h, p + 2 * i, 2);
      return f16_bits_to_float(h);
  }
}

}  // namespace

Weights::Weights(const std::string& dir) : dir_(dir) {
  std::set<std::string> seen;
  for (auto& [path, expected] : shard_files(dir)) {
    auto shard = std::make_unique<Shard>();
    shard->path = path;
    shard->header = nn::read_safetensors_header(path, "hf::Weights");
    for (const std::string& name : expected) {
      const auto& es = shard->header.entries;
      if (std::none_of(es.begin(), es.end(), [&](const nn::SafetensorsEntry& e) { return e.name == name; }))
        throw weights_error(path, fmt::format("the index names it for '{}', which it does not hold", name));
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw weights_error(path, fmt::format("cannot open: {}", std::strerror(errno)));
    shard->size = shard->header.file_size;
    void* m = ::mmap(nullptr, shard->size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) throw weights_error(path, fmt::format("cannot map: {}", std::strerror(errno)));
    shard->map = static_cast<const unsigned char*>(m);
    for (size_t i = 0; i < shard->header.entries.size(); ++i) {
      const std::string& name = shard->header.entries[i].name;
      if (!seen.insert(name).second)
        throw weights_error(dir, fmt::format("tensor '{}' is in two files (the second: '{}')", name, path));
      names_.push_back(name);
      index_.emplace_back(name, Where{shards_.size(), i});
    }
    shards_.push_back(std::move(shard));
  }
  std::sort(index_.begin(), index_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
}

Weights::~Weights() = default;

void convert_floats(void* dst, DType dd, const unsigned char* src, DType sd, size_t n) {
  if (dd == sd) {
    std::memcpy(dst, src, n * dtype_size(dd));
    return;
  }
  if (dd == DType::Float32) {
    float* o = static_cast<float*>(dst);
    for (size_t i = 0; i < n; ++i) o[i] = load_one(src, sd, i);
    return;
  }
  uint16_t* o = static_cast<uint16_t*>(dst);
  for (size_t i = 0; i < n; ++i) {
    const float f = load_one(src, sd, i);
    o[i] = dd == DType::BFloat16 ? float_to_bf16_bits(f) : float_to_f16_bits(f);
  }
}

const Weights::Where& Weights::find(const std::string& name) const {
  auto it = std::lower_bound(index_.begin(), index_.end(), name,
                             [](const auto& item, const std::string& n) { return item.first < n; });
  if (it == index_.end() || it->first != name)
    throw weights_error(dir_, fmt::format("no tensor '{}' in the checkpoint", name));
  return it->second;
}

bool Weights::contains(const std::string& name) const {
  auto it = std::lower_bound(index_.begin(), index_.end(), name,
                             [](const auto& item, const std::string& n) { return item.first < n; });
  return it != index_.end() && it->first == name;
}

const nn::SafetensorsEntry& Weights::entry(const std::string& name) const {
  const Where& w = find(name);
  return shards_[w.shard]->header.entries[w.entry];
}

Tensor Weights::read(const std::string& name) const {
  const Where& w = find(name);
  const Shard& s = *shards_[w.shard];
  const nn::SafetensorsEntry& e = s.header.entries[w.entry];
  Tensor t = Tensor::empty(e.shape, e.dtype, Device::cpu(), "hf::Weights::read");
  std::memcpy(t.raw_data(), s.map + e.begin, e.end - e.begin);
  drop_pages(s, e);
  return t;
}

// The bytes are in a tensor now: let the kernel drop the file's pages from this process (they stay in the
// page cache), so that loading holds each weight once.
void Weights::drop_pages(const Shard& s, const nn::SafetensorsEntry& e) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t lo = (e.begin + page - 1) / page * page, hi = e.end / page * page;
  if (hi > lo) ::madvise(const_cast<unsigned char*>(s.map) + lo, hi - lo, MADV_DONTNEED);
}

std::string Weights::unreadable(const std::string& name) const {
  const nn::SafetensorsEntry& e = entry(name);
  return is_loadable(e.dtype)
             ? std::string()
             : fmt::format("tensor '{}' is {} (need F32, BF16 or F16)", name, dtype_name(e.dtype));
}

void Weights::read_into(const std::string& name, const Tensor& dst) const {
  const Where& w = find(name);
  const Shard& s = *shards_[w.shard];
  const nn::SafetensorsEntry& e = s.header.entries[w.entry];
  const size_t n = static_cast<size_t>(e.shape.numel());
  SACCADE_CHECK(is_loadable(e.dtype) && is_loadable(dst.dtype()),
                "hf::Weights::read_into: '{}': tensor '{}' is {}, the destination {} (need float32, bfloat16 "
                "or float16)",
                s.path, name, dtype_name(e.dtype), dtype_name(dst.dtype()));
  SACCADE_CHECK(dst.device().is_cpu() && dst.is_contiguous() && static_cast<size_t>(dst.numel()) == n,
                "hf::Weights::read_into: '{}': tensor '{}' of shape {} into a destination of shape {}",
                s.path, name, e.shape, dst.shape());
  convert_floats(dst.raw_data(), dst.dtype(), s.map + e.begin, e.dtype, n);
  drop_pages(s, e);
}

// ---- the tables ----

namespace {

// The length along rule.split_dim of the checkpoint tensor's part that fills `ours` (a tensor of the
// module): its own size along that dim, transposed back when the rule transposes. Parts may differ in
// length (a fused q, k, v projection with fewer key/value heads than query heads).
int64_t part_length(const NameRule& rule, const Tensor& ours) {
  const int64_t d = rule.transpose ? 1 - rule.split_dim : rule.split_dim;
  return d >= 0 && d < ours.dim() ? ours.shape()[static_cast<size_t>(d)] : -1;
}

// The shape of a part `len` long along rule.split_dim of the checkpoint tensor of shape `full`, after the
// transpose.
Shape part_shape(const NameRule& rule, const Shape& full, int64_t len) {
  std::vector<int64_t> dims(full.begin(), full.end());
  if (rule.ours.size() > 1) dims[static_cast<size_t>(rule.split_dim)] = len;
  if (rule.transpose) std::swap(dims[0], dims[1]);
  return Shape(dims);
}

// The shape of `shape` with dim d split into (groups, shape[d] / groups).
Shape grouped(const Shape& shape, int64_t d, int64_t groups) {
  std::vector<int64_t> dims(shape.begin(), shape.end());
  dims[static_cast<size_t>(d)] /= groups;
  dims.insert(dims.begin() + d, groups);
  return Shape(dims);
}

}  // namespace

Tensor interleaved_part(const Tensor& full, int64_t dim, int64_t groups, int64_t start, int64_t len) {
  std::vector<int64_t> out(full.shape().begin(), full.shape().end());
  out[static_cast<size_t>(dim)] = len;
  return full.contiguous()
      .reshape(grouped(full.shape(), dim, groups))
      .narrow(dim + 1, start / groups, len / groups)
      .contiguous()
      .reshape(Shape(out));
}

Tensor interleave(const std::vector<Tensor>& parts, int64_t dim, int64_t groups) {
  std::vector<Tensor> blocks;
  int64_t total = 0;
  for (const Tensor& p : parts) {
    blocks.push_back(p.contiguous().reshape(grouped(p.shape(), dim, groups)));
    total += p.shape()[static_cast<size_t>(dim)];
  }
  std::vector<int64_t> out(parts[0].shape().begin(), parts[0].shape().end());
  out[static_cast<size_t>(dim)] = total;
  return ops::cat(blocks, dim + 1).reshape(Shape(out));
}

LoadReport load_weights(nn::Module& module, const TensorSource& weights, const std::vector<NameRule>& table,
                        bool strict, const std::vector<std::string>& ignore) {
  auto fail = [&](const std::string& what) {
    return Error(fmt::format("hf::load_weights: '{}': {}", weights.dir(), what));
  };
  const nn::StateDict ours = module.state_dict();
  std::set<std::string> filled, used;
  // 1. Check everything.
  for (const NameRule& rule : table) {
    if (!weights.contains(rule.hf)) throw fail(fmt::format("the checkpoint has no tensor '{}'", rule.hf));
    const std::string why = weights.unreadable(rule.hf);
    if (!why.empty()) throw fail(why);
    const Shape shape = weights.shape(rule.hf);
    const int64_t parts = static_cast<int64_t>(rule.ours.size());
    if ((rule.transpose && static_cast<size_t>(shape.size()) != 2) ||
        (parts > 1 && (rule.split_dim < 0 || rule.split_dim >= static_cast<int64_t>(shape.size()))))
      throw fail(fmt::format("tensor '{}' has shape {}, which cannot be split into {} along dim {}{}",
                             rule.hf, shape, parts, rule.split_dim, rule.transpose ? " and transposed" : ""));
    if (rule.index >= 0) {  // one entry along dim 0 of a batched tensor
      const Tensor* t = rule.ours.size() == 1 && !rule.transpose ? ours.find(rule.ours[0]) : nullptr;
      if (!t)
        throw fail(fmt::format("tensor '{}' goes to entry {} of '{}', which the model does not have", rule.hf,
                               rule.index, fmt::join(rule.ours, ", ")));
      if (t->dim() < 1 || rule.index >= t->size(0) || t->select(0, rule.index).shape() != shape)
        throw fail(fmt::format("tensor '{}' of shape {} does not fit entry {} of '{}' of shape {}", rule.hf,
                               shape, rule.index, rule.ours[0], t->shape()));
      if (!filled.insert(fmt::format("{}[{}]", rule.ours[0], rule.index)).second)
        throw fail(fmt::format("entry {} of '{}' is filled twice", rule.index, rule.ours[0]));
      used.insert(rule.hf);
      continue;
    }
    int64_t total = 0;  // the parts' lengths along split_dim, which must make up the checkpoint tensor's
    for (const std::string& name : rule.ours) {
      const Tensor* t = ours.find(name);
      if (!t)
        throw fail(fmt::format("tensor '{}' goes to '{}', which the model does not have", rule.hf, name));
      const int64_t len = part_length(rule, *t);
      total += len;
      const Shape want = part_shape(rule, shape, len);
      if (t->shape() != want)
        throw fail(fmt::format("tensor '{}' of shape {} gives '{}' the shape {}, the model's is {}", rule.hf,
                               shape, name, want, t->shape()));
      if (rule.groups > 1 && (rule.transpose || len % rule.groups != 0))
        throw fail(fmt::format("tensor '{}' cannot interleave '{}' in {} groups along dim {}", rule.hf, name,
                               rule.groups, rule.split_dim));
      if (!filled.insert(name).second) throw fail(fmt::format("'{}' is filled twice", name));
    }
    if (parts > 1 && total != shape[static_cast<size_t>(rule.split_dim)])
      throw fail(
          fmt::format("tensor '{}' has shape {}, which cannot be split along dim {} into the model's {} "
                      "parts of {} in all",
                      rule.hf, shape, rule.split_dim, parts, total));
    used.insert(rule.hf);
  }
  for (const auto& [name, t] : ours) {
    if (filled.count(name)) continue;
    // a batched tensor filled entry by entry: every entry once
    int64_t entries = 0;
    while (t.dim() >= 1 && entries < t.size(0) && filled.count(fmt::format("{}[{}]", name, entries)))
      ++entries;
    if (entries == 0 || entries != t.size(0))
      throw fail(entries == 0 ? fmt::format("nothing in the checkpoint fills the model's '{}'", name)
                              : fmt::format("nothing in the checkpoint fills entry {} of the model's '{}'",
                                            entries, name));
  }
  LoadReport report;
  std::vector<std::string> extra;
  for (const std::string& name : weights.names())
    if (!used.count(name) && std::find(ignore.begin(), ignore.end(), name) == ignore.end())
      extra.push_back(name);
  if (!extra.empty() && strict)
    throw fail(
        fmt::format("{} tensor(s) the model has no place for: {}", extra.size(), fmt::join(extra, ", ")));
  report.skipped = extra;
  // 2. Write.
  std::vector<Tensor> written;
  for (const NameRule& rule : table) {
    if (rule.index >= 0) {
      const Tensor& whole = ours.at(rule.ours[0]);
      weights.read_into(rule.hf, whole.select(0, rule.index));  // a contiguous block of the batched tensor
      if (rule.index == 0) written.push_back(whole);            // once (every entry has its row)
      continue;
    }
    if (rule.ours.size() == 1 && !rule.transpose) {
      const Tensor& dst = ours.at(rule.ours[0]);
      weights.read_into(rule.hf, dst);
      written.push_back(dst);
      continue;
    }
    const Tensor full = weights.read(rule.hf);
    const int64_t parts = static_cast<int64_t>(rule.ours.size());
    int64_t start = 0;
    for (int64_t i = 0; i < parts; ++i) {
      const Tensor& dst = ours.at(rule.ours[static_cast<size_t>(i)]);
      const int64_t len = part_length(rule, dst);
      Tensor part = rule.groups > 1 ? interleaved_part(full, rule.split_dim, rule.groups, start, len)
                    : parts > 1     ? full.narrow(rule.split_dim, start, len)
                                    : full;
      start += len;
      if (rule.transpose) part = part.transpose(0, 1);
      const Tensor src = part.to(dst.dtype()).contiguous();
      std::memcpy(dst.raw_data(), src.raw_data(), static_cast<size_t>(src.numel()) * dtype_size(src.dtype()));
      written.push_back(dst);
    }
  }
  ops::bump_versions(written);
  return report;
}

nn::StateDict export_weights(const nn::Module& module, const std::vector<NameRule>& table, DType dtype) {
  const nn::StateDict ours = module.state_dict();
  nn::StateDict out;
  for (const NameRule& rule : table) {
    std::vector<Tensor> parts;
    for (const std::string& name : rule.ours) {
      const Tensor* t = ours.find(name);
      SACCADE_CHECK(t, "hf::export_weights: the model has no '{}' (for '{}')", name, rule.hf);
      Tensor p = (rule.index >= 0 ? t->select(0, rule.index) : *t).to(Device::cpu()).to(dtype);
      parts.push_back(rule.transpose ? p.transpose(0, 1) : p);
    }
    const Tensor joined = parts.size() == 1 ? parts[0]
                          : rule.groups > 1 ? interleave(parts, rule.split_dim, rule.groups)
                                            : ops::cat(parts, rule.split_dim);
    out.insert(rule.hf, joined.contiguous());
  }
  return out;
}

namespace {

// "model-<5 digits>-of-<5 digits>.safetensors": a shard name of transformers' save_pretrained.
bool is_shard_name(const std::string& name) {
  static const std::string head = "model-", mid = "-of-", tail = ".safetensors";
  if (name.size() != head.size() + 5 + mid.size() + 5 + tail.size()) return false;
  auto digits = [&](size_t at) {
    return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(at),
                       name.begin() + static_cast<std::ptrdiff_t>(at + 5),
                       [](char c) { return c >= '0' && c <= '9'; });
  };
  return name.compare(0, head.size(), head) == 0 && digits(head.size()) &&
         name.compare(head.size() + 5, mid.size(), mid) == 0 && digits(head.size() + 5 + mid.size()) &&
         name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& text, const std::string& op) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.flush();
    if (!f) throw Error(fmt::format("{}: cannot write '{}'", op, tmp));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw Error(fmt::format("{}: cannot rename '{}' to '{}': {}", op, tmp, path, ec.message()));
}

void save_pretrained(const std::string& dir, const Config& config, const nn::StateDict& tensors) {
  const std::string config_text = config_json(config);  // before anything is written: it may refuse
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("hf::save_pretrained: cannot make the folder '{}': {}", dir, ec.message()));
  nn::save_safetensors(tensors, (fs::path(dir) / "model.safetensors").string(), {{"format", "pt"}});
  write_file_atomic((fs::path(dir) / "config.json").string(), config_text, "hf::save_pretrained");
  // A sharded save before this one: its index and shards would describe other weights (transformers removes
  // them too). Only after the new files are in place, so that the folder always holds a whole model.
  std::vector<fs::path> stale;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (it->is_regular_file(type_ec) && (name == "model.safetensors.index.json" || is_shard_name(name)))
      stale.push_back(it->path());
  }
  if (ec) throw Error(fmt::format("hf::save_pretrained: cannot list the folder '{}': {}", dir, ec.message()));
  for (const fs::path& p : stale)
    if (!fs::remove(p, ec) && ec)
      throw Error(
          fmt::format("hf::save_pretrained: cannot remove the stale '{}': {}", p.string(), ec.message()));
}

}  // namespace saccade::hf
