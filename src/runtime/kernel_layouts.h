#pragma once
// Weights rearranged once for the kernels that read them every token.
#include <memory>

#include "model/model.h"
#include "ops/matmul.h"

namespace ss {

// With int8 activations (ActQuant::Int8/Fast) on a CPU with int8 kernels: a
// model whose matrices those kernels read (Q4_0, Q8_0, Q4_K-Q6_K) live in one
// arena in huge pages, each as its interleaved copy where the kernels read
// one (int8_layout() in ops/matmul_int8.h; ops/interleave.h; data still
// points at the original rows) and the others moved as they are (data
// points at the copy). The original
// mapped bytes are then released from resident memory (still mapped, for
// any other reader). Otherwise, or when done already, `model`.
std::shared_ptr<const Model> with_kernel_layouts(std::shared_ptr<const Model> model, ActQuant aq);

}  // namespace ss
