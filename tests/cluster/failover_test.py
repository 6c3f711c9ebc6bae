#!/usr/bin/env python3
"""A fleet under load loses no turn when a replica dies (issue 7/7).

3 replicas + nginx (scripts/cluster.sh), 32 clients each with its own
session, 10 turns each: turns 1-3 undisturbed, during turns 4-10 one replica
is killed with -9 and restarted 2 s later. Clients retry a failed request
(connection error, 5xx, 409) with the same Idempotency-Key. Afterwards a
fresh single server replays every session's turns: each answer must equal
the fleet's (greedy), so no turn was lost, duplicated or continued from a
stale copy. Prints one JSON line with the counts and latencies.
Usage: failover_test.py SINKSTREAM_BIN MODEL
"""
import http.client
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BIN, MODEL = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "..", "..", "scripts", "cluster.sh")
SESSIONS, TURNS, KILL_TURN = 32, 10, 4
WORDS = ["cat", "dog", "ball", "tree", "sun", "boat", "cake", "bird", "park", "moon", "frog", "rain"]


def free_base():
    for _ in range(50):
        base = random.randint(20000, 60000)
        ok = True
        for p in range(base, base + 4):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
        if ok:
            return base
    raise SystemExit("no free ports")


def post(port, sid, turn, messages, timeout=60, stream=False):
    """(status, headers, reply text, or the error body when status != 200).
    A stream that ends before [DONE] (its replica died mid-answer) is a
    failure: status -2."""
    body = json.dumps({"messages": messages, "max_tokens": 24, "temperature": 0, "stream": stream})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", "/v1/chat/completions", body, {
            "Content-Type": "application/json", "X-Session-Id": sid, "Idempotency-Key": f"{sid}-turn-{turn}"})
        r = c.getresponse()
        headers = dict((k.lower(), v) for k, v in r.getheaders())
        if r.status != 200:
            return r.status, headers, r.read().decode("utf-8", "replace")
        if not stream:
            return 200, headers, json.loads(r.read())["choices"][0]["message"]["content"]
        text, done = "", False
        for line in r.read().decode("utf-8", "replace").splitlines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                ev = json.loads(line[6:])
                if "error" in ev:
                    return -3, headers, None
                text += ev["choices"][0].get("delta", {}).get("content", "") or ""
        return (200 if done else -2), headers, text if done else None
    finally:
        c.close()


def user_text(i, turn):
    return f"The {WORDS[(i + turn) % len(WORDS)]} and the {WORDS[(3 * i + turn) % len(WORDS)]} went out."


def main():
    if shutil.which("nginx") is None and not os.path.exists("/usr/sbin/nginx"):
        if os.environ.get("CI"):
            raise SystemExit("nginx is not installed (scripts/install_deps.sh --test installs it)")
        print("SKIP: nginx not installed")
        return 77
    state = tempfile.mkdtemp(prefix="sinkstream-cluster-")
    env = dict(os.environ, SINKSTREAM_CLUSTER_DIR=state, SINKSTREAM_BIN=BIN)
    port = free_base()
    cluster = lambda *a: subprocess.run([CLUSTER, *a], env=env, check=True, capture_output=True, text=True).stdout
    cluster("up", "3", str(port), "--", "-m", MODEL, "-t", "1")
    answers = {i: [] for i in range(SESSIONS)}
    log = []  # (session, turn, latency_s, replica, retries, replayed)
    lock = threading.Lock()
    phase_b = threading.Event()
    turn3_done = threading.Barrier(SESSIONS + 1)
    lost = []

    def client(i):
        sid = f"fleet-{i}"
        messages = []
        for turn in range(1, TURNS + 1):
            if turn == KILL_TURN:
                turn3_done.wait()
                phase_b.wait()
            messages.append({"role": "user", "content": user_text(i, turn)})
            t0, retries, deadline = time.time(), 0, time.time() + 90
            while True:
                try:
                    # Odd sessions stream: a stream cut by a dying replica
                    # cannot be retried by nginx, so the client retries it.
                    status, headers, reply = post(port, sid, turn, messages, stream=i % 2 == 1)
                    if status == 200:
                        break
                except (OSError, http.client.HTTPException, ValueError):
                    status, headers = -1, {}
                if time.time() > deadline:
                    with lock:
                        lost.append((sid, turn, status, reply if status > 0 else None))
                    return
                retries += 1
                time.sleep(0.2)
            messages.append({"role": "assistant", "content": reply})
            with lock:
                answers[i].append(reply)
                log.append((i, turn, time.time() - t0, headers.get("x-sinkstream-replica", "?"), retries,
                            headers.get("x-sinkstream-replayed") == "true"))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(SESSIONS)]
    start = time.time()
    for t in threads:
        t.start()
    try:
        turn3_done.wait(timeout=120)
        phase_b.set()
        time.sleep(0.1)  # the kill lands while turns are running
        victim = cluster("pids").split()[0]
        os.kill(int(victim), 9)
        time.sleep(2.0)
        cluster("start", "1")
        for t in threads:
            t.join(timeout=150)
        metrics = cluster("metrics")
    finally:
        if lost:  # what the replicas said about the lost turns' sessions
            for i in range(1, 4):
                log_path = os.path.join(state, f"replica-{i}.log")
                if os.path.exists(log_path):
                    lines = open(log_path, errors="replace").readlines()
                    hits = [l for l in lines if any(e[0] in l for e in lost)]
                    print(f"replica-{i}.log:", "".join((hits or lines)[-20:]), file=sys.stderr)
        cluster("down")
    fleet_s = time.time() - start

    # The oracle: one fresh server, each session's turns in order.
    oracle_port = free_base()
    srv = subprocess.Popen([BIN, "serve", "-m", MODEL, "-t", "1", "--port", str(oracle_port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mismatches = []
    try:
        for _ in range(100):
            try:
                if post(oracle_port, "probe", 0, [{"role": "user", "content": "hi"}], timeout=5)[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        for i in range(SESSIONS):
            messages = []
            for turn in range(1, len(answers[i]) + 1):
                messages.append({"role": "user", "content": user_text(i, turn)})
                status, _, want = post(oracle_port, f"fleet-{i}", turn, messages)
                if want != answers[i][turn - 1]:
                    mismatches.append((i, turn, answers[i][turn - 1], want))
                messages.append({"role": "assistant", "content": answers[i][turn - 1]})
    finally:
        srv.terminate()
        srv.wait()
    shutil.rmtree(state, ignore_errors=True)

    def pct(xs, q):
        xs = sorted(xs)
        return round(1000 * xs[min(len(xs) - 1, int(q * len(xs)))], 1) if xs else None

    calm = [l[2] for l in log if l[1] < KILL_TURN]
    kill = [l[2] for l in log if l[1] >= KILL_TURN]
    by_session = {}
    failovers = 0
    for i, turn, _, replica, _, _ in sorted(log, key=lambda l: (l[0], l[1])):
        if i in by_session and by_session[i] != replica:
            failovers += 1
        by_session[i] = replica
    reloads = sum(float(l.split()[1]) for l in metrics.splitlines() if l.startswith("sinkstream_store_reloads_total"))
    report = {
        "sessions": SESSIONS, "turns": len(log), "expected_turns": SESSIONS * TURNS,
        "failovers": failovers, "retries": sum(l[4] for l in log), "replayed": sum(1 for l in log if l[5]),
        "store_reloads": reloads, "lost_turns": len(lost) + SESSIONS * TURNS - len(log) - len(lost),
        "mismatches_vs_single_server": len(mismatches),
        "latency_ms_without_kill": {"p50": pct(calm, 0.5), "p99": pct(calm, 0.99)},
        "latency_ms_with_kill": {"p50": pct(kill, 0.5), "p99": pct(kill, 0.99)},
        "seconds": round(fleet_s, 1),
    }
    print(json.dumps(report))
    for entry in lost[:5]:
        print("lost (session, turn, last status, last error):", entry, file=sys.stderr)
    for m in mismatches[:5]:
        # Which replica answered each of that session's turns, after how many retries.
        path = [(l[1], l[3], l[4], l[5]) for l in sorted(log) if l[0] == m[0]]
        print("mismatch:", m, "turns (turn, replica, retries, replayed):", path, file=sys.stderr)
    ok = report["lost_turns"] == 0 and not lost and not mismatches and len(log) == SESSIONS * TURNS
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
