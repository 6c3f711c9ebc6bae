#!/usr/bin/env python3
"""Measures the HTTP layer's limits against a running `sinkstream serve`
(loopback only): /health latency and server RSS with many idle keep-alive and
slow-header connections beside live streams, and what oversized inputs cost.

  python3 bench/http_stress.py --server ./build/release/sinkstream -m MODEL
Figures are printed, not asserted (the tests assert the limits themselves).
"""
import argparse
import http.client
import json
import re
import resource
import socket
import statistics
import subprocess
import threading
import time


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def health_ms(port, n=50):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", "/health")
        c.getresponse().read()
        c.close()
        out.append((time.perf_counter() - t) * 1000)
    out.sort()
    return statistics.median(out), out[int(len(out) * 0.99) - 1]


def stream_forever(port, stop):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = json.dumps({"prompt": "Once upon a time", "stream": True, "ignore_eos": True, "max_tokens": 1 << 30})
    c.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    while not stop.is_set():
        if not r.fp.readline():
            break
    c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--slow", type=int, default=1000)
    ap.add_argument("--streams", type=int, default=64)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    p = subprocess.Popen([a.server, "serve", "-m", a.model, "--port", "0", "--header-timeout", "3600",
                          "--max-batch", str(a.streams)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    port = int(re.search(r"(\d+)", p.stdout.readline().decode()).group(1))
    try:
        print(f"server RSS at start: {rss_mib(p.pid):.1f} MiB; /health alone: p50 %.2f ms, p99 %.2f ms" %
              health_ms(port))
        socks = []
        for i in range(a.idle + a.slow):
            s = socket.create_connection(("127.0.0.1", port))
            if i >= a.idle:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: loc")  # headers never finished
            socks.append(s)
        stop = threading.Event()
        threads = [threading.Thread(target=stream_forever, args=(port, stop)) for _ in range(a.streams)]
        for t in threads:
            t.start()
        time.sleep(3)
        p50, p99 = health_ms(port)
        print(f"{a.idle} idle + {a.slow} slow-header connections + {a.streams} live streams: "
              f"/health p50 {p50:.2f} ms, p99 {p99:.2f} ms; server RSS {rss_mib(p.pid):.1f} MiB")
        stop.set()
        for s in socks:
            s.close()
        for t in threads:
            t.join()
        before = rss_mib(p.pid)
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n")
        sent, chunk = 0, b"100000\r\n" + b"a" * 0x100000 + b"\r\n"
        t0 = time.perf_counter()
        try:
            while sent < (500 << 20):
                s.sendall(chunk)
                sent += 1 << 20
        except OSError:
            pass
        answer = s.recv(64).split(b"\r\n")[0].decode(errors="replace")
        s.close()
        print(f"500 MiB chunked body: '{answer}' after {sent >> 20} MiB sent "
              f"({(time.perf_counter() - t0) * 1000:.0f} ms); RSS {before:.1f} -> {rss_mib(p.pid):.1f} MiB")
        s = socket.create_connection(("127.0.0.1", port))
        t0 = time.perf_counter()
        try:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n")
            for i in range(2_000_000 // 64):
                s.sendall(b"".join(b"X-%d: v\r\n" % (i * 64 + k) for k in range(64)))
        except OSError:
            pass
        answer = s.recv(64).split(b"\r\n")[0].decode(errors="replace")
        s.close()
        print(f"2M header fields: '{answer}' ({(time.perf_counter() - t0) * 1000:.0f} ms); "
              f"RSS {rss_mib(p.pid):.1f} MiB")
    finally:
        p.terminate()
        p.wait()


if __name__ == "__main__":
    main()
