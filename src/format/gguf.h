#pragma once
// GGUF v2/v3 reader: metadata, tensor infos, alignment; tensor data stays in
// the memory-mapped file. Every field is bounds-checked; a corrupt file yields
// an Error naming the file and the problem.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "format/tensor.h"
#include "util/mapped_file.h"
#include "util/result.h"

namespace ss {

enum class GgufValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

struct GgufValue {
  GgufValueType type = GgufValueType::U8;
  int64_t i = 0;                                // all integer types and bool
  uint64_t u = 0;                               // unsigned view for U64
  double f = 0;                                 // F32/F64
  std::string s;                                // STRING
  GgufValueType elem_type = GgufValueType::U8;  // ARRAY
  std::vector<GgufValue> arr;

  bool is_int() const;
  bool is_float() const { return type == GgufValueType::F32 || type == GgufValueType::F64; }
};

struct GgufTensorInfo {
  std::string name;
  uint32_t raw_type = 0;
  std::vector<int64_t> ne;
  uint64_t offset = 0;  // relative to data section
  uint64_t nbytes = 0;
};

class GgufFile {
 public:
  static Result<GgufFile> open(const std::string& path);
  static Result<GgufFile> parse(std::shared_ptr<MappedFile> file);

  uint32_t version() const { return version_; }
  const std::string& path() const { return file_->path(); }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  const GgufValue* find(const std::string& key) const;
  Result<std::string> get_string(const std::string& key) const;
  Result<int64_t> get_int(const std::string& key) const;
  Result<double> get_float(const std::string& key) const;
  std::optional<int64_t> opt_int(const std::string& key) const;
  std::optional<double> opt_float(const std::string& key) const;

  // A 1-D or 2-D tensor as a view into the mapping (F32/F16/BF16/Q8_0/Q4_0).
  Result<TensorView> tensor(const std::string& name) const;
  // A 3-D tensor [ne2][ne1][ne0] as ne2 2-D views (MoE experts); a 2-D
  // tensor gives one view.
  Result<std::vector<TensorView>> tensor_slices(const std::string& name) const;
  bool has_tensor(const std::string& name) const;
  std::shared_ptr<MappedFile> mapping() const { return file_; }

 private:
  std::shared_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace ss
