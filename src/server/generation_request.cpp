#include "server/generation_request.h"

namespace ss {

std::string GenerationRequest::take(bool& done, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait_for(lock, timeout, [&] { return !pending_text.empty() || finished; });
  std::string out;
  out.swap(pending_text);
  done = finished;
  return out;
}

std::string GenerationRequest::poll(bool& done) {
  std::lock_guard<std::mutex> lock(mu);
  std::string out;
  out.swap(pending_text);
  done = finished;
  return out;
}

bool GenerationRequest::wait_admitted() {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return admitted || finished; });
  return admitted;
}

void GenerationRequest::notify() {
  cv.notify_all();
  if (on_update) on_update();
}

}  // namespace ss
