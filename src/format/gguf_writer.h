#pragma once
// Writes GGUF v3 files: used by tests and benchmarks to build small models.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "format/ggml_types.h"
#include "format/gguf.h"
#include "util/result.h"

namespace ss {

class GgufWriter {
 public:
  void set_string(const std::string& key, const std::string& v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_strings(const std::string& key, const std::vector<std::string>& v);
  void set_f32s(const std::string& key, const std::vector<float>& v);
  void set_i32s(const std::string& key, const std::vector<int32_t>& v);
  // Any value as read from a GGUF file (copying another file's metadata).
  void set_value(const std::string& key, const GgufValue& v);

  // ne[0] is the row length; data holds ne[0]*ne[1]*... floats, stored as `type`.
  void add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> ne, const std::vector<float>& data);

  // A tensor whose rows are produced while the file is written, so files
  // far larger than memory can be made: fill(row, dst) writes row_bytes.
  using RowFill = std::function<void(int64_t row, uint8_t* dst)>;
  void add_tensor_rows(const std::string& name, GgmlType type, std::vector<int64_t> ne, RowFill fill);

  // A tensor produced whole while the file is written (one tensor in memory
  // at a time, however its rows are computed): fill(dst) writes all of it.
  using TensorFill = std::function<void(uint8_t* dst)>;
  void add_tensor_fill(const std::string& name, GgmlType type, std::vector<int64_t> ne, TensorFill fill);

  std::vector<uint8_t> bytes(uint32_t alignment = 32) const;
  // Streams the file (header, then each tensor), never holding all of it.
  Status write(const std::string& path, uint32_t alignment = 32) const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;  // empty when fill is set
    RowFill fill;
    TensorFill fill_all;
    size_t size() const;
    bool produced() const { return fill || fill_all; }
    void produce(uint8_t* dst) const;
  };
  std::vector<uint8_t> header(uint32_t alignment, std::vector<uint64_t>& offsets) const;
  std::vector<uint8_t> kv_blob_;
  uint64_t n_kv_ = 0;
  std::vector<Tensor> tensors_;
};

}  // namespace ss
