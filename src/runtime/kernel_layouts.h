#pragma once
// Weights rearranged once for the kernels that read them every token.
#include <memory>

#include "model/model.h"
#include "ops/matmul.h"

namespace ss {

// With int8 activations (ActQuant::Int8/Fast) on a CPU with int8 kernels:
// a model whose Q4_0 matrices also carry their interleaved copy
// (ops/interleave.h), which the int8 and bf16 kernels read instead; the
// original mapped bytes are then released from resident memory (they stay
// mapped for any other reader). Otherwise, or when done already, `model`.
std::shared_ptr<const Model> with_kernel_layouts(std::shared_ptr<const Model> model, ActQuant aq);

}  // namespace ss
