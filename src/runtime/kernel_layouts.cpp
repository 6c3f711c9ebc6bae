#include "runtime/kernel_layouts.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "ops/interleave.h"
#include "ops/matmul_int8.h"
#include "util/mapped_file.h"
#include "util/thread_count.h"

namespace ss {

namespace {
// f(w) for every matrix of M (Model or const Model) the int8 kernels read.
template <typename M, typename F>
void for_each_int8_matrix(M& model, F&& f) {
  auto visit = [&](auto& w) {
    if (int8_layout(w) != Int8Layout::None) f(w);
  };
  visit(model.output);
  for (auto& l : model.layers) {
    for (auto* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.router})
      if (!w->empty()) visit(*w);
    for (auto* set : {&l.exp_gate, &l.exp_up, &l.exp_down})
      for (auto& w : *set) visit(w);
  }
}
}  // namespace

std::shared_ptr<const Model> with_kernel_layouts(std::shared_ptr<const Model> model, ActQuant aq) {
  if (aq == ActQuant::None || model->kernel_layouts || std::strcmp(int8_kernels(), "none") == 0) return model;
  bool any = false;
  for_each_int8_matrix(*model, [&](const TensorView&) { any = true; });
  if (!any) return model;  // nothing to move: no copy of the model either
  auto out = std::make_shared<Model>(*model);
  out->kernel_layouts = true;
  std::vector<TensorView*> views;
  for_each_int8_matrix(*out, [&](TensorView& w) { views.push_back(&w); });
  // One arena for all copies: whole huge pages, no rounding per matrix.
  constexpr size_t kAlign = 64;
  auto bytes = [](const TensorView& w) { return row_bytes(w.type, w.ne0) * static_cast<size_t>(w.ne1); };
  auto interleaved = [](const TensorView& w) { return int8_layout(w) == Int8Layout::Interleaved; };
  auto arena_bytes = [&](const TensorView& w) {
    return ((interleaved(w) ? interleaved_bytes(w) : bytes(w)) + kAlign - 1) / kAlign * kAlign;
  };
  std::vector<size_t> offset(views.size());
  size_t total = 0;
  for (size_t i = 0; i < views.size(); ++i) {
    offset[i] = total;
    total += arena_bytes(*views[i]);
  }
  auto arena = allocate_huge(total);
  // Matrices are independent: all cores build them (interleaving a 1B
  // model's K-quants takes seconds on one), largest first so the last one
  // to start is small.
  std::vector<size_t> order(views.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return bytes(*views[a]) > bytes(*views[b]); });
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < order.size();) {
      TensorView* w = views[order[k]];
      uint8_t* dst = arena.get() + offset[order[k]];
      const void* original = w->data;
      if (interleaved(*w)) {
        interleave(*w, dst);
        w->interleaved = dst;
      } else {  // the same rows, only moved into huge pages
        std::memcpy(dst, w->data, bytes(*w));
        w->data = dst;
      }
      release_resident_pages(original, bytes(*w));
    }
  };
  const unsigned cores = static_cast<unsigned>(std::min(8, default_thread_count(CpuUse::LogicalCpus).threads));
  std::vector<std::thread> helpers;
  for (unsigned t = 1; t < std::min<size_t>(cores, order.size()); ++t) helpers.emplace_back(work);
  work();
  for (auto& t : helpers) t.join();
  out->keep_alive.push_back(std::move(arena));
  return out;
}

}  // namespace ss
