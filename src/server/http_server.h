#pragma once
// The HTTP/1.1 transport for the API (api.h), event-driven on Boost.Asio with
// Boost.Beast's parser: idle and slow connections cost a socket and a timer,
// not a thread, and every limit holds before authentication — header bytes
// and fields, a header-read deadline, the body limit under any framing
// (Content-Length or chunked), a connection cap. Streams and non-stream
// requests alike are cancelled when their client disconnects; stop() drains.
// Why this layer and what it withstands: docs/HTTP_LAYER.md.
#include <memory>
#include <string>

#include "server/api.h"

namespace ss {

class HttpServer {
 public:
  HttpServer(Scheduler& sched, const ServerOptions& opts);
  ~HttpServer();
  // Binds (port 0 picks a free one); returns the port or -1.
  int bind();
  // Serves until stop() has drained (blocking).
  bool serve();
  // Stops accepting, lets running requests finish for drain_s, cancels the
  // rest, and returns from serve() once every connection is closed (or a
  // few seconds after the drain at most). Safe from any thread, any time.
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ss
