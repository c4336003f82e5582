// Tensor, Storage and the view arithmetic. Views only rewrite (shape, strides, offset).
#include "ops/tensor.h"

#include <unistd.h>

#include <numeric>
#include <string>

#include "ops/backend.h"
#include "profiler/profiler.h"

namespace saccade {

// ---- Device, Storage ----

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "cuda") return cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    try {
      return cuda(std::stoi(s.substr(5)));
    } catch (const std::exception&) {
    }
  }
  throw Error(fmt::format("Device::parse: expected 'cpu', 'cuda' or 'cuda:N', got '{}'", s));
}

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  data_ = backend(device).allocate(nbytes);
  if (profiler::is_active()) [[unlikely]]
    profiler::detail::record_memory(static_cast<int64_t>(nbytes), device.is_cpu() ? "cpu" : "cuda");
}

Storage::~Storage() {
  if (data_) backend(device_).deallocate(data_, nbytes_);
  if (profiler::is_active()) [[unlikely]]
    profiler::detail::record_memory(-static_cast<int64_t>(nbytes_), device_.is_cpu() ? "cpu" : "cuda");
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  int n = std::max(a.size(), b.size());
  Shape out = Shape::filled(n, 1);
  for (int i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    SACCADE_CHECK(x == y || x == 1 || y == 1, "{}: shapes {} and {} cannot be broadcast together", op, a, b);
    out[i] = x == 1 ? y : x;
  }
  return out;
}

void detail::dtype_mismatch(const char* what, DType have, DType want) {
  throw Error(fmt::format("{}: tensor has dtype {}, accessed as {}", what, have, want));
}

// ---- Tensor ----

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype)
    : storage_(std::move(storage)), shape_(shape), strides_(strides), offset_(offset), dtype_(dtype) {}

// The most bytes one allocation on `device` may ask for: the machine's physical memory for the CPU (a larger
// request cannot succeed in any useful sense; refusing it up front gives an Error instead of bad_alloc or the
// OOM killer). CUDA devices report their own out-of-memory through the backend.
static int64_t device_capacity(Device device) {
  if (!device.is_cpu()) return INT64_MAX;
  static const int64_t cpu_bytes = [] {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : INT64_MAX;
  }();
  return cpu_bytes;
}

int64_t check_allocation(const Shape& shape, DType dtype, Device device, const char* op) {
  const int64_t n = checked_numel(shape, op);
  const int64_t nbytes = checked_mul(n, static_cast<int64_t>(dtype_size(dtype)), op);
  SACCADE_CHECK(nbytes <= device_capacity(device),
                "{}: cannot allocate {} bytes for shape {} of {} on {} (the device holds {} bytes)", op,
                nbytes, shape, dtype, device, device_capacity(device));
  return nbytes;
}

int64_t check_allocation(std::initializer_list<TensorCount> tensors, DType dtype, Device device,
                         const char* op) {
  int64_t total = 0;
  for (const TensorCount& t : tensors) {
    SACCADE_CHECK(t.count >= 0, "{}: negative tensor count {} for shape {}", op, t.count, t.shape);
    const int64_t n = checked_mul(t.count, checked_numel(t.shape, op), op);
    SACCADE_CHECK(!__builtin_add_overflow(total, n, &total),
                  "{}: size too large: more than 2^63 elements in all", op);
  }
  const int64_t nbytes = checked_mul(total, static_cast<int64_t>(dtype_size(dtype)), op);
  if (nbytes <= device_capacity(device)) return nbytes;
  std::string list;
  for (const TensorCount& t : tensors)
    list += fmt::format("{}{} x {}", list.empty() ? "" : ", ", t.count, t.shape);
  throw Error(fmt::format("{}: cannot allocate {} bytes for {} of {} on {} (the device holds {} bytes)", op,
                          nbytes, list, dtype, device, device_capacity(device)));
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, const char* op) {
  const int64_t nbytes = check_allocation(shape, dtype, device, op);
  // the allocator's out-of-memory error names the op that asked: "linspace > allocate: out of memory ..."
  ErrorScope scope(op);
  auto storage = std::make_shared<Storage>(std::max<size_t>(static_cast<size_t>(nbytes), 1), device);
  return Tensor(std::move(storage), shape, contiguous_strides(shape), 0, dtype);
}

void detail::undefined_tensor(const char* what) {
  throw Error(fmt::format("{}: called on an undefined tensor (a default-constructed Tensor)", what));
}

void Tensor::check_defined(const char* op) const {
  if (!storage_) [[unlikely]]
    detail::undefined_tensor(op);
}

Device Tensor::device() const { return storage_ ? storage_->device() : Device::cpu(); }

int64_t Tensor::size(int64_t d) const {
  check_defined("size");
  SACCADE_CHECK(dim() > 0, "size: dim {} requested of a 0-d tensor (it has no dimensions)", d);
  return shape_[normalize_dim(d, dim(), "size")];
}
int64_t Tensor::stride(int64_t d) const {
  check_defined("stride");
  SACCADE_CHECK(dim() > 0, "stride: dim {} requested of a 0-d tensor (it has no dimensions)", d);
  return strides_[normalize_dim(d, dim(), "stride")];
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // as PyTorch: no element can be out of place
  int64_t expected = 1;
  for (int i = dim() - 1; i >= 0; --i) {
    if (shape_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

// Resolves one -1 in `shape` against `numel`; checks the element count.
static Shape infer_shape(const Shape& shape, int64_t numel, const char* op, const Shape& from) {
  Shape out = shape;
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      SACCADE_CHECK(infer < 0, "{}: only one dimension can be -1, got {}", op, shape);
      infer = i;
    } else {
      SACCADE_CHECK(out[i] >= 0, "{}: invalid size in shape {}", op, shape);
      known = checked_mul(known, out[i], op);
    }
  }
  if (infer >= 0) {
    SACCADE_CHECK(known > 0 && numel % known == 0, "{}: shape {} is invalid for input of shape {}", op, shape,
                  from);
    out[infer] = numel / known;
  }
  SACCADE_CHECK(checked_numel(out, op) == numel,
                "{}: shape {} is invalid for input of shape {} ({} elements)", op, shape, from, numel);
  return out;
}

// Strides for viewing (shape, strides) as `target` without copying, or false (as PyTorch's computeStride).
static bool view_strides(const Shape& shape, const Shape& strides, const Shape& target, Shape& out) {
  out = Shape::filled(target.size(), 1);
  if (shape.numel() == 0 || shape.size() == 0) {  // empty or 0-d: any layout of the target is valid
    out = contiguous_strides(target);
    return true;
  }
  int view_d = target.size() - 1;
  int64_t chunk_base_stride = strides.size() ? strides.back() : 1;
  int64_t tensor_numel = 1, view_numel = 1;
  for (int tensor_d = shape.size() - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= shape[tensor_d];
    if (tensor_d == 0 ||
        (shape[tensor_d - 1] != 1 && strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || target[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= target[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (tensor_d > 0) {
        chunk_base_stride = strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

Tensor Tensor::view(const Shape& shape) const {
  check_defined("view");
  Shape target = infer_shape(shape, numel(), "view", shape_);
  Shape st;
  SACCADE_CHECK(view_strides(shape_, strides_, target, st),
                "view: cannot view a tensor of shape {} and strides {} as {}; use reshape", shape_, strides_,
                target);
  return Tensor(storage_, target, st, offset_, dtype_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  check_defined("reshape");
  Shape target = infer_shape(shape, numel(), "reshape", shape_);
  Shape st;
  if (view_strides(shape_, strides_, target, st)) return Tensor(storage_, target, st, offset_, dtype_);
  return contiguous().view(target);
}

Tensor Tensor::permute(const Shape& dims) const {
  check_defined("permute");
  SACCADE_CHECK(dims.size() == dim(), "permute: got {} dims {} for a tensor of shape {}", dims.size(), dims,
                shape_);
  Shape sh = shape_, st = strides_;
  bool seen[kMaxDims] = {};
  for (int i = 0; i < dim(); ++i) {
    int d = normalize_dim(dims[i], dim(), "permute");
    SACCADE_CHECK(!seen[d], "permute: repeated dim in {} for shape {}", dims, shape_);
    seen[d] = true;
    sh[i] = shape_[d];
    st[i] = strides_[d];
  }
  return Tensor(storage_, sh, st, offset_, dtype_);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  check_defined("transpose");
  int a = normalize_dim(d0, dim(), "transpose"), b = normalize_dim(d1, dim(), "transpose");
  if (dim() == 0) return *this;
  Shape sh = shape_, st = strides_;
  std::swap(sh[a], sh[b]);
  std::swap(st[a], st[b]);
  return Tensor(storage_, sh, st, offset_, dtype_);
}

Tensor Tensor::t() const {
  check_defined("t");
  SACCADE_CHECK(dim() <= 2, "t: expects a tensor of at most 2 dims, got shape {}", shape_);
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::squeeze() const {
  check_defined("squeeze");
  Shape sh, st;
  for (int i = 0; i < dim(); ++i)
    if (shape_[i] != 1) sh.push_back(shape_[i]), st.push_back(strides_[i]);
  return Tensor(storage_, sh, st, offset_, dtype_);
}

Tensor Tensor::squeeze(int64_t d) const {
  check_defined("squeeze");
  if (dim() == 0) return *this;
  int a = normalize_dim(d, dim(), "squeeze");
  if (shape_[a] != 1) return *this;
  Shape sh = shape_, st = strides_;
  sh.erase(a);
  st.erase(a);
  return Tensor(storage_, sh, st, offset_, dtype_);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  check_defined("unsqueeze");
  int a = normalize_dim(d, dim() + 1, "unsqueeze");
  Shape sh = shape_, st = strides_;
  int64_t s = a < dim() ? strides_[a] * shape_[a] : 1;
  sh.insert(a, 1);
  st.insert(a, s);
  return Tensor(storage_, sh, st, offset_, dtype_);
}

Tensor Tensor::expand(const Shape& shape) const {
  check_defined("expand");
  if (shape == shape_) return *this;
  SACCADE_CHECK(shape.size() >= dim(), "expand: cannot expand shape {} to {} (fewer dims)", shape_, shape);
  int lead = shape.size() - dim();
  Shape sh = shape, st = Shape::filled(shape.size(), 0);
  for (int i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      SACCADE_CHECK(shape[i] >= 0, "expand: cannot expand shape {} to {}", shape_, shape);
      continue;
    }
    int64_t have = shape_[i - lead];
    int64_t want = shape[i] == -1 ? have : shape[i];
    SACCADE_CHECK(want >= 0 && (have == want || have == 1), "expand: cannot expand shape {} to {}", shape_,
                  shape);
    sh[i] = want;
    st[i] = have == want ? strides_[i - lead] : 0;
  }
  checked_numel(sh, "expand");
  return Tensor(storage_, sh, st, offset_, dtype_);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  check_defined("flatten");
  if (dim() == 0) return reshape({1});
  int a = normalize_dim(start_dim, dim(), "flatten"), b = normalize_dim(end_dim, dim(), "flatten");
  SACCADE_CHECK(a <= b, "flatten: start_dim {} after end_dim {} for shape {}", start_dim, end_dim, shape_);
  Shape sh;
  for (int i = 0; i < a; ++i) sh.push_back(shape_[i]);
  int64_t p = 1;
  for (int i = a; i <= b; ++i) p *= shape_[i];
  sh.push_back(p);
  for (int i = b + 1; i < dim(); ++i) sh.push_back(shape_[i]);
  return reshape(sh);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  check_defined("narrow");
  SACCADE_CHECK(dim() > 0, "narrow: cannot narrow a 0-d tensor");
  int a = normalize_dim(d, dim(), "narrow");
  if (start < 0) start += shape_[a];
  // written so that no sum can overflow: start <= size, length <= size - start
  SACCADE_CHECK(start >= 0 && length >= 0 && start <= shape_[a] && length <= shape_[a] - start,
                "narrow: start {} length {} out of range for dim {} of shape {}", start, length, a, shape_);
  Shape sh = shape_;
  sh[a] = length;
  return Tensor(storage_, sh, strides_, offset_ + start * strides_[a], dtype_);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  check_defined("slice");
  SACCADE_CHECK(dim() > 0, "slice: cannot slice a 0-d tensor");
  int a = normalize_dim(d, dim(), "slice");
  SACCADE_CHECK(step > 0, "slice: step must be positive, got {}", step);
  int64_t n = shape_[a];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sh = shape_, st = strides_;
  sh[a] = end == start ? 0 : (end - start - 1) / step + 1;
  // a step beyond the dim selects one element; its stride never matters (and must not overflow)
  st[a] = strides_[a] * std::min<int64_t>(step, std::max<int64_t>(n, 1));
  return Tensor(storage_, sh, st, offset_ + start * strides_[a], dtype_);
}

Tensor Tensor::select(int64_t d, int64_t i) const {
  check_defined("select");
  SACCADE_CHECK(dim() > 0, "select: cannot select from a 0-d tensor");
  int a = normalize_dim(d, dim(), "select");
  if (i < 0) i += shape_[a];
  SACCADE_CHECK(i >= 0 && i < shape_[a], "select: index {} out of range for dim {} of shape {}", i, a,
                shape_);
  Shape sh = shape_, st = strides_;
  sh.erase(a);
  st.erase(a);
  return Tensor(storage_, sh, st, offset_ + i * strides_[a], dtype_);
}

Tensor Tensor::contiguous() const {
  check_defined("contiguous");
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  check_defined("clone");
  Tensor out = empty(shape_, dtype_, device());
  backend(device()).copy(*this, out);
  return out;
}

Tensor Tensor::to(DType dtype) const {
  check_defined("to");
  if (dtype == dtype_) return *this;
  Tensor out = empty(shape_, dtype, device());
  backend(device()).copy(*this, out);
  return out;
}

Tensor Tensor::to(Device device) const {
  check_defined("to");
  if (device == this->device()) return *this;
  Tensor src = contiguous();
  Tensor out = empty(shape_, dtype_, device);
  size_t nbytes = numel() * itemsize();
  if (device.is_cpu()) {
    backend(src.device()).copy_to_host(out.raw_data(), src.raw_data(), nbytes);
  } else if (src.device().is_cpu()) {
    backend(device).copy_from_host(out.raw_data(), src.raw_data(), nbytes);
  } else {
    return src.to(Device::cpu()).to(device);
  }
  return out;
}

}  // namespace saccade
