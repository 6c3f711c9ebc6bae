#include "format/safetensors.h"

#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

namespace ss {

namespace {
constexpr uint64_t kMaxHeader = 100u << 20;

bool dtype_size(const std::string& d, size_t& out) {
  if (d == "F32")
    out = 4;
  else if (d == "F16" || d == "BF16")
    out = 2;
  else if (d == "F64" || d == "I64")
    out = 8;
  else if (d == "I32" || d == "U32")
    out = 4;
  else if (d == "I16" || d == "U16")
    out = 2;
  else if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2")
    out = 1;
  else
    return false;
  return true;
}
}  // namespace

Status SafetensorsSet::add(std::shared_ptr<MappedFile> file) {
  const auto bytes = file->bytes();
  const std::string& path = file->path();
  if (bytes.size() < 8) return make_error(path + ": truncated safetensors file (no header length)");
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kMaxHeader || n > bytes.size() - 8)
    return make_error(path + ": corrupt safetensors header length " + std::to_string(n));
  const std::string_view header(reinterpret_cast<const char*>(bytes.data() + 8), static_cast<size_t>(n));
  auto j = nlohmann::json::parse(header, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return make_error(path + ": safetensors header is not a JSON object");
  const uint8_t* data = bytes.data() + 8 + n;
  const size_t data_size = bytes.size() - 8 - static_cast<size_t>(n);
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (it->is_object())
        for (auto m = it->begin(); m != it->end(); ++m)
          if (m->is_string()) metadata_[m.key()] = m->get<std::string>();
      continue;
    }
    const auto& e = *it;
    const std::string where = path + ": tensor '" + it.key() + "': ";
    if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() || !e.contains("shape") ||
        !e["shape"].is_array() || !e.contains("data_offsets") || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2)
      return make_error(where + "malformed entry");
    SafetensorsEntry se;
    se.dtype = e["dtype"].get<std::string>();
    se.file = path;
    size_t es;
    if (!dtype_size(se.dtype, es)) return make_error(where + "unknown dtype " + se.dtype);
    uint64_t elems = 1;
    if (e["shape"].size() > 8) return make_error(where + "too many dims");
    for (const auto& d : e["shape"]) {
      if (!d.is_number_unsigned()) return make_error(where + "shape must hold non-negative integers");
      const uint64_t v = d.get<uint64_t>();
      if (v > (uint64_t{1} << 40) || (v != 0 && elems > (uint64_t{1} << 40) / v))
        return make_error(where + "implausible shape");
      elems *= v;
      se.shape.push_back(static_cast<int64_t>(v));
    }
    const auto& off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return make_error(where + "data_offsets must be non-negative integers");
    const uint64_t b = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (b > end || end > data_size) return make_error(where + "data extends past the end of the file (truncated?)");
    if (end - b != elems * es) return make_error(where + "byte size does not match shape and dtype");
    se.data = data + b;
    se.nbytes = static_cast<size_t>(end - b);
    if (entries_.count(it.key())) return make_error(where + "duplicate tensor");
    entries_[it.key()] = std::move(se);
  }
  files_.push_back(std::move(file));
  return ok_status();
}

Result<SafetensorsSet> SafetensorsSet::open_file(const std::string& path) {
  SafetensorsSet s;
  SS_ASSIGN_OR_RETURN(auto f, MappedFile::open(path));
  SS_TRY(s.add(std::move(f)));
  return s;
}

Result<SafetensorsSet> SafetensorsSet::open_dir(const std::string& dir) {
  const std::string index_path = dir + "/model.safetensors.index.json";
  auto index = read_text_file(index_path);
  if (!index.ok()) return open_file(dir + "/model.safetensors");
  auto j = nlohmann::json::parse(index.value(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return make_error(index_path + ": malformed index (no weight_map object)");
  std::set<std::string> shards;
  for (const auto& v : j["weight_map"]) {
    if (!v.is_string()) return make_error(index_path + ": weight_map values must be file names");
    const auto name = v.get<std::string>();
    if (name.find('/') != std::string::npos || name.find("..") != std::string::npos)
      return make_error(index_path + ": shard name '" + name + "' must be a plain file name");
    shards.insert(name);
  }
  SafetensorsSet s;
  for (const auto& shard : shards) {
    SS_ASSIGN_OR_RETURN(auto f, MappedFile::open(dir + "/" + shard));
    SS_TRY(s.add(std::move(f)));
  }
  return s;
}

Result<TensorView> SafetensorsSet::tensor(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) return make_error("safetensors: missing tensor '" + name + "'");
  const auto& e = it->second;
  TensorView v;
  v.name = name;
  if (e.dtype == "F32")
    v.type = GgmlType::F32;
  else if (e.dtype == "F16")
    v.type = GgmlType::F16;
  else if (e.dtype == "BF16")
    v.type = GgmlType::BF16;
  else
    return make_error(e.file + ": tensor '" + name + "' has unsupported dtype " + e.dtype +
                      " (supported: F32, F16, BF16)");
  if (e.shape.empty() || e.shape.size() > 2) return make_error(e.file + ": tensor '" + name + "' must be 1-D or 2-D");
  v.ne0 = e.shape.back();
  v.ne1 = e.shape.size() == 2 ? e.shape[0] : 1;
  v.data = e.data;
  return v;
}

}  // namespace ss
