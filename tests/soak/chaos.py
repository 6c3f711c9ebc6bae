#!/usr/bin/env python3
"""Chaos/soak test for `sinkstream serve` (bounded, about two minutes).

Workers send a random mix of valid and invalid requests: session turns
(greedy and seeded, streamed or not), one-off completions, malformed JSON,
wrong types and content types, oversized and chunked bodies, streams that
hang up midway, session deletes, /metrics and /health. Halfway through the
server is killed with SIGKILL and restarted on its state directory.

Invariants checked:
  * the server never crashes (only our kill ends it);
  * no 5xx other than 503, and every 503 carries Retry-After;
  * after every session is deleted the KV pool is back to its baseline;
  * RSS stays bounded (no growth after warm-up beyond a margin);
  * every completed session turn equals what a fresh server (the oracle)
    answers when that session's transcript is replayed alone.
Prints the figures the issue asks for and exits non-zero on any violation.
Standard library only.
"""
import argparse
import http.client
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

PROMPTS = [
    "Once upon a time", "The little dog", "Lily and Ben went to the park.", "One day, a cat",
    "The sun was hot and", "Tom had a red ball.", "Sara liked to sing", "A big tree stood",
]

# Structured output's one-off requests ask for this; a finished answer must be such an object.
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8, "pattern": "^[A-Z][a-z]*$"},
                                           "n": {"type": "integer"},
                                           "ok": {"type": ["boolean", "null"]},
                                           "p": {"type": "number", "minimum": 0, "exclusiveMaximum": 1,
                                                 "multipleOf": 0.01}},
          "required": ["name", "n"], "additionalProperties": False}


# Grammar requests (GBNF) ask for this sentence; a finished answer must match
# the same language written as a Python regex.
GRAMMAR = 'root ::= " " name " was " ("happy" | "sad" | "big") "."\nname ::= [A-Z] [a-z]{1,8}\n'
GRAMMAR_RE = re.compile(r" [A-Z][a-z]{1,8} was (happy|sad|big)\.")


def schema_ok(text):
    try:
        v = json.loads(text)
    except ValueError:
        return False
    if not isinstance(v, dict):
        return False
    p_text = re.search(r'"p"\s*:\s*(-?[0-9.]+)', text)  # the number as written: exactly hundredths in [0, 1)
    if "p" in v and not (p_text and re.fullmatch(r"0(\.[0-9]{0,2}0*)?|-0(\.0*)?", p_text.group(1))):
        return False
    return (set(v) <= {"name", "n", "ok", "p"} and {"name", "n"} <= set(v)
            and isinstance(v["name"], str) and len(v["name"]) <= 8 and re.fullmatch("[A-Z][a-z]*", v["name"])
            and isinstance(v["n"], int) and not isinstance(v["n"], bool)
            and v.get("ok") in (True, False, None))


class Server:
    def __init__(self, binary, model, state_dir, extra):
        self.binary, self.model, self.state_dir, self.extra = binary, model, state_dir, extra
        self.proc, self.port = None, None

    def start(self):
        args = [self.binary, "serve", "-m", self.model, "--port", "0"] + self.extra
        if self.state_dir:
            args += ["--state-dir", self.state_dir]
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log)
        line = self.proc.stdout.readline().decode()
        m = re.search(r"listening on port (\d+)", line)
        if not m:
            self.log.seek(0)
            sys.exit("server did not start: " + line + self.log.read().decode(errors="replace")[-2000:])
        self.port = int(m.group(1))

    def alive(self):
        return self.proc.poll() is None

    def rss_mib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
        return 0.0

    def kill9(self):
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                sys.exit("server did not exit within 20 s of SIGTERM")


def request(port, method, path, body=None, headers=None, timeout=60):
    """Returns (status, headers dict, body bytes); raises OSError on transport errors."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def stream(port, path, body, hang_up_after=None, timeout=60):
    """SSE request; returns (status, headers, text, finish_reason, complete). Hangs up after N events if asked."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", path, body=json.dumps(dict(body, stream=True)).encode(),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        if r.status != 200:
            return r.status, hdrs, r.read().decode(errors="replace"), None, True
        text, finish, events = "", None, 0
        for raw in r:
            line = raw.decode(errors="replace").strip()
            if not line.startswith("data: "):
                continue
            payload = line[6:]
            if payload == "[DONE]":
                return 200, hdrs, text, finish, True
            j = json.loads(payload)
            if "error" in j:
                return 200, hdrs, text, "error", True
            if not j["choices"]:  # several choices end with a usage-only chunk
                continue
            ch = j["choices"][0]
            text += ch.get("text", "")
            finish = ch.get("finish_reason") or finish
            events += 1
            if hang_up_after is not None and events >= hang_up_after:
                return 200, hdrs, text, None, False
        return 200, hdrs, text, finish, False
    finally:
        c.close()


class Chaos:
    def __init__(self, server, seconds, workers, seed):
        self.server, self.seconds, self.workers = server, seconds, workers
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.statuses = {}
        self.violations = []
        self.requests = 0
        self.transport_errors = 0
        self.epoch = 0
        self.transcripts = {}  # session id -> list of (body, answer) turns that completed
        self.tainted = set()   # sessions whose state is uncertain (hung up / killed mid-turn)
        self.deleted = []      # (id, transcript) of deleted sessions, still checked

    def count(self, status, hdrs):
        with self.lock:
            self.requests += 1
            self.statuses[status] = self.statuses.get(status, 0) + 1
            if status >= 500 and status != 503:
                self.violations.append(f"status {status}")
            if status == 503 and "retry-after" not in hdrs:
                self.violations.append("503 without Retry-After")

    def worker(self, w, deadline):
        rng = random.Random(self.rng.random())
        while time.time() < deadline:
            with self.lock:  # the restart swaps both under this lock
                epoch, port = self.epoch, self.server.port
            sid = f"w{w}s{rng.randrange(4)}"
            action = rng.random()
            try:
                if action < 0.45:
                    self.session_turn(rng, port, sid)
                elif action < 0.60:
                    body = {"prompt": rng.choice(PROMPTS), "max_tokens": rng.randrange(1, 24),
                            "temperature": 1.0, "seed": rng.randrange(1000)}
                    # Several choices, prompt lists, logprobs and echo ride the same batches.
                    n, prompts = rng.choice([1, 1, 2, 3]), 1
                    if rng.random() < 0.3:
                        prompts = rng.randrange(1, 4)
                        body["prompt"] = [rng.choice(PROMPTS) for _ in range(prompts)]
                    body["n"] = n
                    if rng.random() < 0.3:
                        body.update(logprobs=rng.randrange(0, 4), echo=rng.random() < 0.5)
                    structured = rng.random() < 0.2 and not body.get("echo")
                    grammar = structured and rng.random() < 0.5
                    if grammar:  # a GBNF grammar's mask in the same batches
                        body["grammar"] = GRAMMAR
                        body["max_tokens"] = 40
                    elif structured:  # structured output: a schema mask in the same batches
                        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "s", "schema": SCHEMA}}
                        body["max_tokens"] = 80
                    if rng.random() < 0.3:
                        s, h, *_ = stream(port, "/v1/completions", body, hang_up_after=rng.randrange(1, 6))
                        self.count(s, h)
                    else:
                        s, h, raw = request(port, "POST", "/v1/completions", body)
                        self.count(s, h)
                        if s == 200 and len(json.loads(raw)["choices"]) != n * prompts:
                            with self.lock:
                                self.violations.append(f"{n * prompts} choices asked, got another count")
                        if s == 200 and structured:
                            for ch in json.loads(raw)["choices"]:
                                fits = GRAMMAR_RE.fullmatch(ch["text"]) if grammar else schema_ok(ch["text"])
                                if ch["finish_reason"] == "stop" and not fits:
                                    with self.lock:
                                        self.violations.append(f"structured answer off its shape: {ch['text']!r}")
                elif action < 0.72:
                    self.invalid(rng, port)
                elif action < 0.80:
                    self.oversized(rng, port)
                elif action < 0.88:
                    body = {"prompt": rng.choice(PROMPTS), "max_tokens": 200, "session_id": sid}
                    with self.lock:
                        self.tainted.add(sid)
                    s, h, *_ = stream(port, "/v1/completions", body, hang_up_after=rng.randrange(1, 6))
                    self.count(s, h)
                elif action < 0.93:
                    s, h, _ = request(port, "DELETE", f"/v1/sessions/{sid}")
                    self.count(s, h)
                    if s == 200:
                        with self.lock:
                            tr = self.transcripts.pop(sid, [])
                            if sid not in self.tainted and tr:
                                self.deleted.append((sid, tr))
                            self.tainted.discard(sid)
                else:
                    s, h, _ = request(port, "GET", rng.choice(["/metrics", "/health", "/v1/sessions", "/v1/models"]))
                    self.count(s, h)
            except (OSError, http.client.HTTPException, ValueError) as e:
                with self.lock:
                    self.tainted.add(sid)
                    if epoch == self.epoch and self.server.alive():
                        self.transport_errors += 1
                        self.violations.append(f"transport error outside a restart (worker {w}, action "
                                               f"{action:.2f}): {e!r}")
                time.sleep(0.05)

    def session_turn(self, rng, port, sid):
        body = {"prompt": " " + rng.choice(PROMPTS), "max_tokens": rng.randrange(1, 20), "session_id": sid}
        if rng.random() < 0.5:
            body.update(temperature=0)
        else:
            body.update(temperature=0.9, seed=rng.randrange(1 << 30))
        with self.lock:
            if sid in self.tainted:
                return
        if rng.random() < 0.5:
            s, h, text, finish, complete = stream(port, "/v1/completions", body)
            ok = s == 200 and complete and finish in ("stop", "length")
        else:
            s, h, raw = request(port, "POST", "/v1/completions", body)
            ok = s == 200
            text = json.loads(raw)["choices"][0]["text"] if ok else ""
        self.count(s, h)
        with self.lock:
            if ok:
                self.transcripts.setdefault(sid, []).append((body, text))
            elif s not in (503, 429):
                self.tainted.add(sid)

    def invalid(self, rng, port):
        cases = [
            (b"{not json", {}), (b'{"prompt": 5}', {}), (b'{"prompt": "x", "max_tokens": -2}', {}),
            (b'{"prompt": "x", "temperature": "hot"}', {}), (b'{"prompt": "x", "session_id": "../etc"}', {}),
            (b'{"messages": "hi"}', {}), (b'{"prompt": "x"}', {"Content-Type": "text/plain"}),
            (b'{"prompt": "x", "n": 65}', {}), (b"[]", {}), (b'{"prompt": "\\ud800"}', {}),
            (b'{"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"schema": '
             b'{"type": "string", "pattern": "a(?=b)"}}}}', {}),
            (b'{"prompt": "x", "grammar": "root ::= root \\"a\\" | \\"b\\""}', {}),
        ]
        body, hdrs = rng.choice(cases)
        path = rng.choice(["/v1/completions", "/v1/chat/completions", "/v1/nope"])
        s, h, _ = request(port, "POST", path, body, hdrs)
        self.count(s, h)
        if not 400 <= s < 500:
            with self.lock:
                self.violations.append(f"invalid request got {s}")

    def oversized(self, rng, port):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            if rng.random() < 0.5:
                sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n"
                             b"Content-Type: application/json\r\nContent-Length: 50000000\r\n\r\n")
            else:
                head = (b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                        b"Transfer-Encoding: chunked\r\n\r\n")
                chunk = b"10000\r\n" + b"a" * 0x10000 + b"\r\n"
                sock.sendall(head)
                try:
                    for _ in range(40):  # 2.5 MiB, over the 1 MiB default
                        sock.sendall(chunk)
                except OSError:
                    pass  # the server answered and closed: what we want
            data = b""
            while b"\r\n" not in data:
                part = sock.recv(4096)
                if not part:
                    break
                data += part
            if not data.startswith(b"HTTP/1.1 "):
                # No status line: a transport error, judged as the worker
                # judges every other one (a violation unless a restart ended
                # the connection).
                raise ConnectionError(f"oversized body: connection ended without a status line ({data[:40]!r})")
            status = int(data.split(b" ")[1])
            self.count(status, {})
            if status != 413:
                with self.lock:
                    self.violations.append(f"oversized body got {status}")
        finally:
            sock.close()


def metric(port, name):
    _, _, body = request(port, "GET", "/metrics")
    m = re.search(rf"^{name} (\S+)$", body.decode(), re.M)
    return float(m.group(1)) if m else -1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--seconds", type=float, default=80)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    state = tempfile.mkdtemp(prefix="sinkstream-chaos-")
    # A pool for three live sequences: sessions spill, live work queues.
    extra = ["--kv-blocks", "400", "--max-queue", "3"]  # 133 blocks per sequence by default
    srv = Server(a.server, a.model, state, extra)
    srv.start()
    chaos = Chaos(srv, a.seconds, a.workers, a.seed)
    t0 = time.time()
    deadline = t0 + a.seconds
    threads = [threading.Thread(target=chaos.worker, args=(w, deadline)) for w in range(a.workers)]
    for t in threads:
        t.start()
    time.sleep(min(10, a.seconds / 4))
    rss_warm = srv.rss_mib()
    rss_max = rss_warm
    killed = False
    spills = restores = 0
    while time.time() < deadline:
        time.sleep(0.5)
        if not srv.alive():
            chaos.violations.append("server died: exit code %s" % srv.proc.returncode)
            break
        rss_max = max(rss_max, srv.rss_mib())
        if not killed and time.time() > t0 + a.seconds / 2:
            spills += metric(srv.port, "sinkstream_session_spills_total")
            restores += metric(srv.port, "sinkstream_session_restores_total")
            # Workers read (epoch, port) under the lock: none can pair the new
            # epoch with the old port. Failures of requests begun before are
            # expected (their epoch is old).
            with chaos.lock:
                chaos.epoch += 1
                srv.kill9()
                srv.start()  # same state directory: every saved session comes back
            killed = True
            time.sleep(min(5, a.seconds / 8))
            rss_warm = srv.rss_mib()
    for t in threads:
        t.join()
    rss_end = srv.rss_mib()
    spills += metric(srv.port, "sinkstream_session_spills_total")
    restores += metric(srv.port, "sinkstream_session_restores_total")
    for sid in list(chaos.transcripts) + list(chaos.tainted):
        request(srv.port, "DELETE", f"/v1/sessions/{sid}")
    for w in range(a.workers):
        for k in range(4):
            request(srv.port, "DELETE", f"/v1/sessions/w{w}s{k}")
    used = metric(srv.port, "sinkstream_kv_blocks_used")
    shared = metric(srv.port, "sinkstream_kv_blocks_shared")
    if used != 0 or shared != 0:
        chaos.violations.append(f"pool not back to baseline: {used} blocks used, {shared} shared")
    srv.stop()
    if rss_end > rss_warm * 1.5 + 32:
        chaos.violations.append(f"RSS grew: {rss_warm:.1f} MiB after warm-up, {rss_end:.1f} MiB at the end")

    # The oracle: a fresh server, each untainted session's transcript alone.
    oracle = Server(a.server, a.model, "", [])
    oracle.start()
    checked = mismatched = 0
    sessions = [(sid, tr) for sid, tr in chaos.transcripts.items() if sid not in chaos.tainted] + chaos.deleted
    for n, (sid, tr) in enumerate(sessions):
        oid = f"oracle{n}"
        for body, answer in tr:
            s, _, raw = request(oracle.port, "POST", "/v1/completions", dict(body, session_id=oid))
            got = json.loads(raw)["choices"][0]["text"] if s == 200 else f"<{s}>"
            checked += 1
            if got != answer:
                mismatched += 1
                chaos.violations.append(f"session {sid}: turn differs from the oracle: {answer!r} vs {got!r}")
                break
        request(oracle.port, "DELETE", f"/v1/sessions/{oid}")
    oracle.stop()

    by_status = ", ".join(f"{k}: {v}" for k, v in sorted(chaos.statuses.items()))
    print(f"chaos: {a.seconds:.0f} s, {a.workers} workers, one kill -9 + restart")
    print(f"  requests {chaos.requests} ({by_status})")
    print(f"  transport errors outside the restart: {chaos.transport_errors}")
    print(f"  RSS {rss_warm:.1f} MiB after warm-up (after restart), {rss_end:.1f} MiB at the end, max {rss_max:.1f} MiB")
    print(f"  sessions spilled {spills:.0f}, restored {restores:.0f}; pool after deleting all: {used:.0f} used")
    print(f"  oracle: {checked} turns of {len(sessions)} sessions replayed on a fresh server, {mismatched} differ")
    for v in chaos.violations[:20]:
        print("  VIOLATION:", v)
    sys.exit(1 if chaos.violations else 0)


if __name__ == "__main__":
    main()
