#include "model/config.h"

#include <cmath>

namespace ss {

float ModelConfig::attention_scale() const {
  return attn_scale > 0 ? attn_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
}

int ModelConfig::sliding_window() const {
  for (const auto& l : layer_attention)
    if (l.sliding_window > 0) return l.sliding_window;
  return 0;
}

int ModelConfig::full_layers() const {
  int n = 0;
  for (const auto& l : layer_attention) n += l.sliding_window == 0;
  return n;
}

void ModelConfig::uniform_layers() { layer_attention.assign(static_cast<size_t>(n_layers), LayerAttention{}); }

}  // namespace ss
