#include "format/gguf.h"

#include <limits>

#include "util/byte_reader.h"

namespace ss {

namespace {

constexpr uint64_t kMaxTensors = 1u << 20;
constexpr uint64_t kMaxKv = 1u << 20;
constexpr int kMaxArrayDepth = 2;

bool elem_size(GgufValueType t, size_t& out) {
  switch (t) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::BOOL:
      out = 1;
      return true;
    case GgufValueType::U16:
    case GgufValueType::I16:
      out = 2;
      return true;
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::F32:
      out = 4;
      return true;
    case GgufValueType::U64:
    case GgufValueType::I64:
    case GgufValueType::F64:
      out = 8;
      return true;
    case GgufValueType::STRING:
      out = 8;
      return true;  // at least the length field
    case GgufValueType::ARRAY:
      out = 12;
      return true;
  }
  return false;
}

struct Parser {
  ByteReader r;
  std::string path;

  Error fail(const std::string& what) const {
    return make_error(path + ": corrupt GGUF at byte " + std::to_string(r.pos()) + ": " + what);
  }

  Result<std::string> read_string() {
    uint64_t len;
    if (!r.read(len)) return fail("truncated string length");
    if (len > r.remaining()) return fail("string length " + std::to_string(len) + " exceeds file");
    std::string s;
    r.read_bytes(static_cast<size_t>(len), s);
    return s;
  }

  Result<GgufValue> read_value(GgufValueType type, int depth) {
    GgufValue v;
    v.type = type;
    auto rd = [&](auto tag) -> bool {
      decltype(tag) x;
      if (!r.read(x)) return false;
      if constexpr (std::is_floating_point_v<decltype(tag)>) {
        v.f = static_cast<double>(x);
      } else {
        v.i = static_cast<int64_t>(x);
        v.u = static_cast<uint64_t>(x);
      }
      return true;
    };
    bool ok = true;
    switch (type) {
      case GgufValueType::U8:
        ok = rd(uint8_t{});
        break;
      case GgufValueType::I8:
        ok = rd(int8_t{});
        break;
      case GgufValueType::U16:
        ok = rd(uint16_t{});
        break;
      case GgufValueType::I16:
        ok = rd(int16_t{});
        break;
      case GgufValueType::U32:
        ok = rd(uint32_t{});
        break;
      case GgufValueType::I32:
        ok = rd(int32_t{});
        break;
      case GgufValueType::U64:
        ok = rd(uint64_t{});
        break;
      case GgufValueType::I64:
        ok = rd(int64_t{});
        break;
      case GgufValueType::F32:
        ok = rd(float{});
        break;
      case GgufValueType::F64:
        ok = rd(double{});
        break;
      case GgufValueType::BOOL: {
        uint8_t b = 0;
        ok = r.read(b);
        if (ok && b > 1) return fail("bool value " + std::to_string(b));
        v.i = b;
        break;
      }
      case GgufValueType::STRING: {
        SS_ASSIGN_OR_RETURN(v.s, read_string());
        break;
      }
      case GgufValueType::ARRAY: {
        if (depth >= kMaxArrayDepth) return fail("arrays nested too deeply");
        uint32_t et;
        uint64_t n;
        if (!r.read(et) || !r.read(n)) return fail("truncated array header");
        size_t es;
        if (!elem_size(static_cast<GgufValueType>(et), es))
          return fail("unknown array element type " + std::to_string(et));
        if (n > r.remaining() / es) return fail("array count " + std::to_string(n) + " exceeds file");
        v.elem_type = static_cast<GgufValueType>(et);
        v.arr.reserve(static_cast<size_t>(n));
        for (uint64_t k = 0; k < n; ++k) {
          SS_ASSIGN_OR_RETURN(auto e, read_value(v.elem_type, depth + 1));
          v.arr.push_back(std::move(e));
        }
        break;
      }
      default:
        return fail("unknown metadata value type " + std::to_string(static_cast<uint32_t>(type)));
    }
    if (!ok) return fail("truncated metadata value");
    return v;
  }
};

}  // namespace

bool GgufValue::is_int() const {
  switch (type) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::U16:
    case GgufValueType::I16:
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::U64:
    case GgufValueType::I64:
    case GgufValueType::BOOL:
      return true;
    default:
      return false;
  }
}

Result<GgufFile> GgufFile::open(const std::string& path) {
  SS_ASSIGN_OR_RETURN(auto f, MappedFile::open(path));
  return parse(std::move(f));
}

Result<GgufFile> GgufFile::parse(std::shared_ptr<MappedFile> file) {
  GgufFile g;
  g.file_ = file;
  Parser p{ByteReader(file->bytes()), file->path()};
  uint32_t magic;
  if (!p.r.read(magic) || magic != 0x46554747u) return make_error(file->path() + ": not a GGUF file (bad magic)");
  if (!p.r.read(g.version_)) return p.fail("truncated header");
  if (g.version_ != 2 && g.version_ != 3)
    return make_error(file->path() + ": unsupported GGUF version " + std::to_string(g.version_) + " (supported: 2, 3)");
  uint64_t n_tensors, n_kv;
  if (!p.r.read(n_tensors) || !p.r.read(n_kv)) return p.fail("truncated header");
  if (n_tensors > kMaxTensors) return p.fail("tensor count " + std::to_string(n_tensors) + " is implausible");
  if (n_kv > kMaxKv) return p.fail("metadata count " + std::to_string(n_kv) + " is implausible");

  for (uint64_t i = 0; i < n_kv; ++i) {
    SS_ASSIGN_OR_RETURN(auto key, p.read_string());
    uint32_t t;
    if (!p.r.read(t)) return p.fail("truncated metadata type");
    SS_ASSIGN_OR_RETURN(auto val, p.read_value(static_cast<GgufValueType>(t), 0));
    g.kv_[key] = std::move(val);
  }
  if (auto it = g.kv_.find("general.alignment"); it != g.kv_.end()) {
    if (!it->second.is_int() || it->second.i <= 0 || (it->second.i & (it->second.i - 1)) != 0 ||
        it->second.i > (1 << 20))
      return p.fail("general.alignment must be a power of two");
    g.alignment_ = static_cast<uint64_t>(it->second.i);
  }

  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo ti;
    SS_ASSIGN_OR_RETURN(ti.name, p.read_string());
    uint32_t n_dims;
    if (!p.r.read(n_dims)) return p.fail("truncated tensor info");
    if (n_dims == 0 || n_dims > 4) return p.fail("tensor '" + ti.name + "' has " + std::to_string(n_dims) + " dims");
    uint64_t elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne;
      if (!p.r.read(ne)) return p.fail("truncated tensor dims");
      if (ne == 0 || ne > (uint64_t{1} << 40) || elems > std::numeric_limits<uint64_t>::max() / ne)
        return p.fail("tensor '" + ti.name + "' has an invalid dimension " + std::to_string(ne));
      elems *= ne;
      ti.ne.push_back(static_cast<int64_t>(ne));
    }
    if (elems > (uint64_t{1} << 40)) return p.fail("tensor '" + ti.name + "' is implausibly large");
    if (!p.r.read(ti.raw_type) || !p.r.read(ti.offset)) return p.fail("truncated tensor info");
    if (const auto tr = type_traits(ti.raw_type)) {
      if (ti.ne[0] % tr->block_elems != 0)
        return p.fail("tensor '" + ti.name + "' row length is not a multiple of its block size");
      ti.nbytes = elems / static_cast<uint64_t>(tr->block_elems) * static_cast<uint64_t>(tr->block_bytes);
    }
    if (ti.offset % g.alignment_ != 0) return p.fail("tensor '" + ti.name + "' data offset is not aligned");
    if (g.tensor_index_.count(ti.name)) return p.fail("duplicate tensor '" + ti.name + "'");
    g.tensor_index_[ti.name] = g.tensors_.size();
    g.tensors_.push_back(std::move(ti));
  }
  const uint64_t pos = p.r.pos();
  g.data_offset_ = (pos + g.alignment_ - 1) / g.alignment_ * g.alignment_;
  const uint64_t file_size = file->bytes().size();
  if (g.data_offset_ > file_size && n_tensors > 0) return p.fail("file ends before tensor data");
  for (const auto& ti : g.tensors_) {
    if (ti.nbytes == 0) continue;  // unsupported type: reported when used
    const uint64_t data_size = file_size - g.data_offset_;
    if (ti.offset > data_size || ti.nbytes > data_size - ti.offset)
      return make_error(file->path() + ": truncated GGUF: tensor '" + ti.name +
                        "' data extends past the end of the file");
  }
  return g;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

Result<std::string> GgufFile::get_string(const std::string& key) const {
  const auto* v = find(key);
  if (!v) return make_error(path() + ": missing metadata key '" + key + "'");
  if (v->type != GgufValueType::STRING) return make_error(path() + ": metadata key '" + key + "' is not a string");
  return v->s;
}

Result<int64_t> GgufFile::get_int(const std::string& key) const {
  const auto* v = find(key);
  if (!v) return make_error(path() + ": missing metadata key '" + key + "'");
  if (!v->is_int()) return make_error(path() + ": metadata key '" + key + "' is not an integer");
  return v->i;
}

Result<double> GgufFile::get_float(const std::string& key) const {
  const auto* v = find(key);
  if (!v) return make_error(path() + ": missing metadata key '" + key + "'");
  if (v->is_float()) return v->f;
  if (v->is_int()) return static_cast<double>(v->i);
  return make_error(path() + ": metadata key '" + key + "' is not a number");
}

std::optional<int64_t> GgufFile::opt_int(const std::string& key) const {
  const auto* v = find(key);
  if (!v || !v->is_int()) return std::nullopt;
  return v->i;
}

std::optional<double> GgufFile::opt_float(const std::string& key) const {
  const auto* v = find(key);
  if (!v) return std::nullopt;
  if (v->is_float()) return v->f;
  if (v->is_int()) return static_cast<double>(v->i);
  return std::nullopt;
}

bool GgufFile::has_tensor(const std::string& name) const { return tensor_index_.count(name) != 0; }

Result<TensorView> GgufFile::tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  if (it == tensor_index_.end()) return make_error(path() + ": missing tensor '" + name + "'");
  const auto& ti = tensors_[it->second];
  if (!type_traits(ti.raw_type))
    return make_error(path() + ": tensor '" + name + "' has unsupported type " + type_name(ti.raw_type) +
                      " (supported: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, MXFP4)");
  if (ti.ne.size() > 2) return make_error(path() + ": tensor '" + name + "' has more than 2 dims");
  TensorView v;
  v.name = name;
  v.type = static_cast<GgmlType>(ti.raw_type);
  v.ne0 = ti.ne[0];
  v.ne1 = ti.ne.size() > 1 ? ti.ne[1] : 1;
  v.data = file_->bytes().data() + data_offset_ + ti.offset;
  return v;
}

Result<std::vector<TensorView>> GgufFile::tensor_slices(const std::string& name) const {
  auto it = tensor_index_.find(name);
  if (it == tensor_index_.end()) return make_error(path() + ": missing tensor '" + name + "'");
  const auto& ti = tensors_[it->second];
  if (!type_traits(ti.raw_type))
    return make_error(path() + ": tensor '" + name + "' has unsupported type " + type_name(ti.raw_type));
  if (ti.ne.size() < 2 || ti.ne.size() > 3) return make_error(path() + ": tensor '" + name + "' is not 2-D or 3-D");
  const int64_t n = ti.ne.size() > 2 ? ti.ne[2] : 1;
  const auto type = static_cast<GgmlType>(ti.raw_type);
  const size_t slice_bytes = row_bytes(type, ti.ne[0]) * static_cast<size_t>(ti.ne[1]);
  std::vector<TensorView> out;
  for (int64_t e = 0; e < n; ++e) {
    TensorView v;
    v.name = name + "[" + std::to_string(e) + "]";
    v.type = type;
    v.ne0 = ti.ne[0];
    v.ne1 = ti.ne[1];
    v.data = file_->bytes().data() + data_offset_ + ti.offset + static_cast<size_t>(e) * slice_bytes;
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace ss
