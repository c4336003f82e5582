// safetensors reading and writing, and model / optimizer checkpoints on top of it.
#include "nn/serialization.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <numeric>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "nn/grad_scaler.h"

namespace saccade::nn {

static_assert(std::endian::native == std::endian::little, "safetensors stores little-endian data");

namespace {

using ordered_json = nlohmann::ordered_json;
constexpr uint64_t kMaxHeader = 100'000'000;  // as the reference implementation
const char* const kOptimizerPrefix = "optimizer.";
const char* const kScalerPrefix = "scaler.";

// The supported codes, for error messages: F32, F64, ...
std::string supported_codes() {
  std::string out;
  for (const DTypeInfo& i : kDTypes) out += fmt::format("{}{}", out.empty() ? "" : ", ", i.safetensors);
  return out;
}

// Writes all of [p, p + n) to fd; false on error.
bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w, n -= static_cast<size_t>(w);
  }
  return true;
}

[[noreturn]] void io_error(const std::string& path, const char* what) {
  throw Error(fmt::format("save_safetensors: '{}': {} failed: {}", path, what, std::strerror(errno)));
}

}  // namespace

// ---- writing ----

void save_safetensors(const StateDict& tensors, const std::string& path, const Metadata& metadata) {
  std::vector<std::pair<std::string, Tensor>> items;
  for (const auto& [name, t] : tensors) {
    SACCADE_CHECK(t.defined(), "save_safetensors: '{}': tensor '{}' is undefined", path, name);
    SACCADE_CHECK(name != "__metadata__", "save_safetensors: '{}': '__metadata__' is reserved", path);
    items.emplace_back(name, t.to(Device::cpu()).contiguous());
  }
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
    int ra = dtype_info(a.second.dtype()).safetensors_order,
        rb = dtype_info(b.second.dtype()).safetensors_order;
    return ra != rb ? ra > rb : a.first < b.first;
  });

  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json m = ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : items) {
    uint64_t nbytes = static_cast<uint64_t>(t.numel()) * t.itemsize();
    ordered_json info = ordered_json::object();
    info["dtype"] = dtype_info(t.dtype()).safetensors;
    info["shape"] = ordered_json::array();
    for (int64_t s : t.shape()) info["shape"].push_back(s);
    info["data_offsets"] = ordered_json::array({offset, offset + nbytes});
    header[name] = std::move(info);
    offset += nbytes;
  }
  std::string text;
  try {
    text = header.dump(-1, ' ', /*ensure_ascii=*/false);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("save_safetensors: '{}': cannot encode the header: {}", path, e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  char len[8];
  uint64_t n = text.size();
  std::memcpy(len, &n, 8);

  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_error(tmp, "open");
  bool ok = write_all(fd, len, 8) && write_all(fd, text.data(), text.size());
  for (size_t i = 0; ok && i < items.size(); ++i) {
    const Tensor& t = items[i].second;
    ok = write_all(fd, static_cast<const char*>(t.raw_data()), t.numel() * t.itemsize());
  }
  ok = ok && ::fsync(fd) == 0;
  int saved_errno = errno;
  ok = (::close(fd) == 0) && ok;
  if (!ok) {
    errno = saved_errno;
    ::unlink(tmp.c_str());
    io_error(tmp, "write");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    saved_errno = errno;
    ::unlink(tmp.c_str());
    errno = saved_errno;
    io_error(path, "rename");
  }
  // Make the rename itself durable (best effort: some filesystems refuse fsync on directories).
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/') + 1);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

// ---- reading ----

SafetensorsHeader read_safetensors_header(const std::string& path, const std::string& op) {
  auto fail = [&](const std::string& what) -> Error {
    return Error(fmt::format("{}: '{}': {}", op, path, what));
  };
  std::ifstream f(path, std::ios::binary);
  if (!f) throw fail(fmt::format("cannot open the file: {}", std::strerror(errno)));
  f.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(f.tellg());
  f.seekg(0);
  if (size < 8) throw fail(fmt::format("file too short ({} bytes) to hold the 8-byte header length", size));
  unsigned char len[8];
  f.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  if (n > kMaxHeader || n > size - 8) {
    // Not a safetensors file at all, most often: say so, and what it looks like, before the raw figure.
    bool text = true;
    for (unsigned char c : len)
      text = text && (c == '\n' || c == '\r' || c == '\t' || (c >= 0x20 && c < 0x7f));
    const std::string start = text ? fmt::format(" (it begins like a text file: \"{}\")",
                                                 std::string(reinterpret_cast<const char*>(len), 8))
                                   : "";
    throw fail(
        fmt::format("not a safetensors file{}: its first 8 bytes, read as the header's length, give "
                    "{} bytes, {}",
                    start, n,
                    n > kMaxHeader ? fmt::format("more than the limit of {} bytes", kMaxHeader)
                                   : fmt::format("more than the file's {} bytes", size)));
  }
  std::string text(n, '\0');
  f.read(text.data(), static_cast<std::streamsize>(n));
  if (!f) throw fail("read error in the header");

  // Parse, noting duplicate top-level keys (JSON objects would silently keep the last one).
  std::unordered_set<std::string> seen;
  std::string duplicate;
  ordered_json header;
  try {
    header =
        ordered_json::parse(text, [&](int depth, ordered_json::parse_event_t event, ordered_json& parsed) {
          if (depth == 1 && event == ordered_json::parse_event_t::key && parsed.is_string() &&
              !seen.insert(parsed.get<std::string>()).second && duplicate.empty())
            duplicate = parsed.get<std::string>();
          return true;
        });
  } catch (const nlohmann::json::exception& e) {
    throw fail(fmt::format("invalid JSON header: {}", e.what()));
  }
  if (!header.is_object()) throw fail("the header is not a JSON object");
  if (!duplicate.empty()) throw fail(fmt::format("duplicate key '{}' in the header", duplicate));

  using Entry = SafetensorsEntry;
  SafetensorsHeader out;
  std::vector<Entry>& entries = out.entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) throw fail("__metadata__ is not a JSON object");
      for (const auto& [k, v] : info.items()) {
        if (!v.is_string()) throw fail(fmt::format("__metadata__ value of '{}' is not a string", k));
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
        !info.contains("data_offsets"))
      throw fail(fmt::format("tensor '{}' needs an object with dtype, shape and data_offsets", name));
    Entry e{name, DType::Float32, {}, 0, 0};
    const auto& dt = info["dtype"];
    if (!dt.is_string() || !dtype_from_safetensors(dt.get<std::string>(), e.dtype))
      throw fail(fmt::format("tensor '{}' has unsupported dtype {} (saccade reads {})", name, dt.dump(),
                             supported_codes()));
    const auto& sh = info["shape"];
    if (!sh.is_array() || sh.size() > static_cast<size_t>(kMaxDims))
      throw fail(fmt::format("tensor '{}' has an invalid shape {}", name, sh.dump()));
    uint64_t count = 1;
    for (const auto& s : sh) {
      if (!s.is_number_unsigned())
        throw fail(fmt::format("tensor '{}' has an invalid shape {}", name, sh.dump()));
      uint64_t v = s.get<uint64_t>();
      if (v > (uint64_t{1} << 62) || (v != 0 && count > (uint64_t{1} << 62) / v))
        throw fail(fmt::format("tensor '{}': shape {} is too large", name, sh.dump()));
      count *= v;
      e.shape.push_back(static_cast<int64_t>(v));
    }
    const auto& off = info["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw fail(fmt::format("tensor '{}' has invalid data_offsets {}", name, off.dump()));
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.end < e.begin || e.end > size - 8 - n)
      throw fail(fmt::format("tensor '{}' has data_offsets [{}, {}] outside the data buffer of {} bytes",
                             name, e.begin, e.end, size - 8 - n));
    if (count > std::numeric_limits<uint64_t>::max() / dtype_size(e.dtype))  // count * itemsize would wrap
      throw fail(fmt::format("tensor '{}' of dtype {} and shape {} needs more than 2^64 bytes", name,
                             dt.get<std::string>(), e.shape));
    if (e.end - e.begin != count * dtype_size(e.dtype))
      throw fail(fmt::format(
          "tensor '{}' of dtype {} and shape {} needs {} bytes, its data_offsets [{}, {}] hold {}", name,
          dt.get<std::string>(), e.shape, count * dtype_size(e.dtype), e.begin, e.end, e.end - e.begin));
    entries.push_back(std::move(e));
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  for (const Entry& e : entries) {
    if (e.begin < pos)
      throw fail(
          fmt::format("tensor '{}' overlaps the tensor before it (offset {} < {})", e.name, e.begin, pos));
    if (e.begin > pos)
      throw fail(
          fmt::format("hole in the data buffer before tensor '{}' (offset {} > {})", e.name, e.begin, pos));
    pos = e.end;
  }
  if (pos != size - 8 - n)
    throw fail(fmt::format("the tensors cover {} bytes of a data buffer of {} bytes", pos, size - 8 - n));
  for (Entry& e : entries) e.begin += 8 + n, e.end += 8 + n;  // from the start of the file
  out.file_size = size;
  return out;
}

Safetensors load_safetensors(const std::string& path) {
  auto fail = [&](const std::string& what) -> Error {
    return Error(fmt::format("load_safetensors: '{}': {}", path, what));
  };
  SafetensorsHeader header = read_safetensors_header(path, "load_safetensors");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw fail(fmt::format("cannot open the file: {}", std::strerror(errno)));
  Safetensors out;
  out.metadata = std::move(header.metadata);

  for (const SafetensorsEntry& e : header.entries) {
    Tensor t;
    try {  // a shape of 0 elements can still be one Tensor refuses: [2^62, 0, 2^62]
      t = Tensor::empty(e.shape, e.dtype, Device::cpu(), "load_safetensors");
    } catch (const Error& err) {
      throw fail(fmt::format("tensor '{}': {}", e.name, err.what()));
    }
    f.seekg(static_cast<std::streamoff>(e.begin));
    f.read(static_cast<char*>(t.raw_data()), static_cast<std::streamsize>(e.end - e.begin));
    if (!f) throw fail(fmt::format("read error in tensor '{}'", e.name));
    if (e.dtype == DType::Bool) {
      const uint8_t* p = t.data<uint8_t>();
      if (std::any_of(p, p + t.numel(), [](uint8_t b) { return b > 1; }))
        throw fail(fmt::format("bool tensor '{}' holds a byte other than 0 or 1", e.name));
    }
    out.tensors.insert(e.name, std::move(t));
  }
  return out;
}

// ---- modules and optimizers ----

namespace {
Metadata with_format(Metadata m) {
  m.emplace("format", "pt");  // what transformers writes; safetensors.torch accepts any metadata
  return m;
}

StateDict model_part(const StateDict& all) {
  StateDict out;
  for (const auto& [k, t] : all)
    if (k.rfind(kOptimizerPrefix, 0) != 0 && k.rfind(kScalerPrefix, 0) != 0) out.insert(k, t);
  return out;
}
}  // namespace

void save(const Module& module, const std::string& path, const Metadata& metadata) {
  save_safetensors(module.state_dict(), path, with_format(metadata));
}

Metadata load(Module& module, const std::string& path) {
  Safetensors file = load_safetensors(path);
  StateDict dict = model_part(file.tensors);
  try {
    module.load_state_dict(dict, /*strict=*/true);
  } catch (const Error& e) {
    throw Error(fmt::format("load: '{}': {}", path, e.what()));
  }
  return file.metadata;
}

void save_checkpoint(const std::string& path, const Module& module, const Optimizer& optimizer, int64_t step,
                     const Metadata& metadata, const GradScaler* scaler) {
  SACCADE_CHECK(step >= 0, "save_checkpoint: '{}': negative step {}", path, step);
  SACCADE_CHECK(!metadata.count("step"), "save_checkpoint: '{}': the metadata key 'step' is reserved", path);
  StateDict all = module.state_dict();
  auto add_prefixed = [&](const char* prefix, const StateDict& part, const char* whose) {
    for (const auto& [k, t] : part) {
      SACCADE_CHECK(!all.contains(prefix + k),
                    "save_checkpoint: '{}': module key '{}{}' clashes with the {}'s", path, prefix, k, whose);
      all.insert(prefix + k, t);
    }
  };
  add_prefixed(kOptimizerPrefix, optimizer.state_dict(), "optimizer");
  if (scaler) add_prefixed(kScalerPrefix, scaler->state_dict(), "scaler");
  Metadata m = with_format(metadata);
  m["step"] = std::to_string(step);
  save_safetensors(all, path, m);
}

CheckpointInfo load_checkpoint(const std::string& path, Module& module, Optimizer& optimizer,
                               GradScaler* scaler) {
  Safetensors file = load_safetensors(path);
  StateDict model, optim, scaling;
  for (const auto& [k, t] : file.tensors) {
    if (k.rfind(kOptimizerPrefix, 0) == 0) {
      optim.insert(k.substr(std::strlen(kOptimizerPrefix)), t);
    } else if (k.rfind(kScalerPrefix, 0) == 0) {
      scaling.insert(k.substr(std::strlen(kScalerPrefix)), t);
    } else {
      model.insert(k, t);
    }
  }
  CheckpointInfo info;
  auto it = file.metadata.find("step");
  SACCADE_CHECK(it != file.metadata.end(), "load_checkpoint: '{}': no 'step' in the metadata", path);
  const std::string& s = it->second;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), info.step);
  SACCADE_CHECK(ec == std::errc() && ptr == s.data() + s.size() && info.step >= 0,
                "load_checkpoint: '{}': invalid step '{}' in the metadata", path, s);
  try {
    module.check_state_dict(model, /*strict=*/true);
    optimizer.check_state_dict(optim);
    if (scaler) scaler->check_state_dict(scaling);
  } catch (const Error& e) {
    throw Error(fmt::format("load_checkpoint: '{}': {}", path, e.what()));
  }
  module.load_state_dict(model, true);
  optimizer.load_state_dict(optim);
  if (scaler) scaler->load_state_dict(scaling);
  info.metadata = std::move(file.metadata);
  return info;
}

}  // namespace saccade::nn
