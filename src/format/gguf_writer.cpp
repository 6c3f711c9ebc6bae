#include "format/gguf_writer.h"

#include "util/atomic_file.h"
#include "util/byte_writer.h"
#include "util/check.h"

namespace ss {

namespace {
void put_str(std::vector<uint8_t>& b, const std::string& s) {
  put<uint64_t>(b, s.size());
  put_bytes(b, s.data(), s.size());
}
// Value type codes from the GGUF spec.
constexpr uint32_t kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kStr = 8, kArr = 9;
}  // namespace

void GgufWriter::set_string(const std::string& key, const std::string& v) {
  put_str(kv_blob_, key);
  put<uint32_t>(kv_blob_, kStr);
  put_str(kv_blob_, v);
  ++n_kv_;
}
void GgufWriter::set_u32(const std::string& key, uint32_t v) {
  put_str(kv_blob_, key);
  put<uint32_t>(kv_blob_, kU32);
  put<uint32_t>(kv_blob_, v);
  ++n_kv_;
}
void GgufWriter::set_i32(const std::string& key, int32_t v) {
  put_str(kv_blob_, key);
  put<uint32_t>(kv_blob_, kI32);
  put<int32_t>(kv_blob_, v);
  ++n_kv_;
}
void GgufWriter::set_f32(const std::string& key, float v) {
  put_str(kv_blob_, key);
  put<uint32_t>(kv_blob_, kF32);
  put<float>(kv_blob_, v);
  ++n_kv_;
}
void GgufWriter::set_bool(const std::string& key, bool v) {
  put_str(kv_blob_, key);
  put<uint32_t>(kv_blob_, kBool);
  put<uint8_t>(kv_blob_, v ? 1 : 0);
  ++n_kv_;
}
void GgufWriter::set_strings(const std::string& key, const std::vector<std::string>& v) {
  put_str(kv_blob_, key);
  put<uint32_t>(kv_blob_, kArr);
  put<uint32_t>(kv_blob_, kStr);
  put<uint64_t>(kv_blob_, v.size());
  for (const auto& s : v) put_str(kv_blob_, s);
  ++n_kv_;
}
void GgufWriter::set_f32s(const std::string& key, const std::vector<float>& v) {
  put_str(kv_blob_, key);
  put<uint32_t>(kv_blob_, kArr);
  put<uint32_t>(kv_blob_, kF32);
  put<uint64_t>(kv_blob_, v.size());
  for (float f : v) put<float>(kv_blob_, f);
  ++n_kv_;
}
void GgufWriter::set_i32s(const std::string& key, const std::vector<int32_t>& v) {
  put_str(kv_blob_, key);
  put<uint32_t>(kv_blob_, kArr);
  put<uint32_t>(kv_blob_, kI32);
  put<uint64_t>(kv_blob_, v.size());
  for (int32_t x : v) put<int32_t>(kv_blob_, x);
  ++n_kv_;
}

namespace {
void put_value(std::vector<uint8_t>& b, const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::BOOL:
      put<uint8_t>(b, static_cast<uint8_t>(v.i));
      return;
    case GgufValueType::U16:
    case GgufValueType::I16:
      put<uint16_t>(b, static_cast<uint16_t>(v.i));
      return;
    case GgufValueType::U32:
    case GgufValueType::I32:
      put<uint32_t>(b, static_cast<uint32_t>(v.i));
      return;
    case GgufValueType::U64:
      put<uint64_t>(b, v.u);
      return;
    case GgufValueType::I64:
      put<int64_t>(b, v.i);
      return;
    case GgufValueType::F32:
      put<float>(b, static_cast<float>(v.f));
      return;
    case GgufValueType::F64:
      put<double>(b, v.f);
      return;
    case GgufValueType::STRING:
      put_str(b, v.s);
      return;
    case GgufValueType::ARRAY:
      put<uint32_t>(b, static_cast<uint32_t>(v.elem_type));
      put<uint64_t>(b, v.arr.size());
      for (const auto& e : v.arr) put_value(b, e);
      return;
  }
}
}  // namespace

void GgufWriter::set_value(const std::string& key, const GgufValue& v) {
  put_str(kv_blob_, key);
  put<uint32_t>(kv_blob_, static_cast<uint32_t>(v.type));
  put_value(kv_blob_, v);
  ++n_kv_;
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne,
                            const std::vector<float>& data) {
  int64_t n = 1;
  for (auto d : ne) n *= d;
  SS_CHECK(static_cast<int64_t>(data.size()) == n);
  Tensor t{name, type, std::move(ne), {}, {}, {}};
  const int64_t rows = n / t.ne[0];
  const size_t rb = row_bytes(type, t.ne[0]);
  t.data.resize(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) quantize_row(type, data.data() + r * t.ne[0], t.data.data() + r * rb, t.ne[0]);
  tensors_.push_back(std::move(t));
}

void GgufWriter::add_tensor_rows(const std::string& name, GgmlType type, std::vector<int64_t> ne, RowFill fill) {
  tensors_.push_back(Tensor{name, type, std::move(ne), {}, std::move(fill), {}});
}

void GgufWriter::add_tensor_fill(const std::string& name, GgmlType type, std::vector<int64_t> ne, TensorFill fill) {
  tensors_.push_back(Tensor{name, type, std::move(ne), {}, {}, std::move(fill)});
}

void GgufWriter::Tensor::produce(uint8_t* dst) const {
  if (fill_all) return fill_all(dst);
  const size_t rb = row_bytes(type, ne[0]);
  const auto rows = static_cast<int64_t>(size() / rb);
  for (int64_t r = 0; r < rows; ++r) fill(r, dst + static_cast<size_t>(r) * rb);
}

size_t GgufWriter::Tensor::size() const {
  if (!produced()) return data.size();
  int64_t rows = 1;
  for (size_t i = 1; i < ne.size(); ++i) rows *= ne[i];
  return row_bytes(type, ne[0]) * static_cast<size_t>(rows);
}

std::vector<uint8_t> GgufWriter::header(uint32_t alignment, std::vector<uint64_t>& offsets) const {
  std::vector<uint8_t> b;
  put<uint32_t>(b, 0x46554747u);
  put<uint32_t>(b, 3);
  put<uint64_t>(b, tensors_.size());
  put<uint64_t>(b, n_kv_ + 1);
  b.insert(b.end(), kv_blob_.begin(), kv_blob_.end());
  put_str(b, "general.alignment");
  put<uint32_t>(b, kU32);
  put<uint32_t>(b, alignment);
  uint64_t offset = 0;
  offsets.clear();
  for (const auto& t : tensors_) {
    put_str(b, t.name);
    put<uint32_t>(b, static_cast<uint32_t>(t.ne.size()));
    for (auto d : t.ne) put<uint64_t>(b, static_cast<uint64_t>(d));
    put<uint32_t>(b, static_cast<uint32_t>(t.type));
    put<uint64_t>(b, offset);
    offsets.push_back(offset);
    offset += (t.size() + alignment - 1) / alignment * alignment;
  }
  while (b.size() % alignment) b.push_back(0);
  return b;
}

std::vector<uint8_t> GgufWriter::bytes(uint32_t alignment) const {
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> b = header(alignment, offsets);
  const size_t base = b.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    b.resize(base + offsets[i]);
    if (!t.produced()) {
      b.insert(b.end(), t.data.begin(), t.data.end());
      continue;
    }
    b.resize(b.size() + t.size());
    t.produce(b.data() + base + offsets[i]);
  }
  return b;
}

Status GgufWriter::write(const std::string& path, uint32_t alignment) const {
  // Replaced whole or not at all (util/atomic_file.h): a write cut short (a
  // full disk, Ctrl-C, a kill) never leaves a truncated model where a good
  // one was. Through a symbolic link, its file is replaced (-o /dev/stdout
  // into a file); /dev/null or a pipe is written in place.
  SS_ASSIGN_OR_RETURN(AtomicFile out, AtomicFile::create(path));
  std::vector<uint64_t> offsets;
  SS_TRY(out.write(header(alignment, offsets)));
  uint64_t written = 0;  // bytes of the data section so far
  std::vector<uint8_t> buf;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    buf.assign(offsets[i] - written, 0);  // alignment padding
    SS_TRY(out.write(buf));
    written = offsets[i];
    if (!t.produced()) {
      SS_TRY(out.write(t.data));
    } else if (t.fill_all) {
      buf.resize(t.size());
      t.produce(buf.data());
      SS_TRY(out.write(buf));
    } else {
      const size_t rb = row_bytes(t.type, t.ne[0]);
      const int64_t rows = static_cast<int64_t>(t.size() / rb);
      buf.resize(rb);
      for (int64_t r = 0; r < rows; ++r) {
        t.fill(r, buf.data());
        SS_TRY(out.write(buf));
      }
    }
    written += t.size();
  }
  return out.commit();
}

}  // namespace ss
