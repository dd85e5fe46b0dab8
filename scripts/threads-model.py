#!/usr/bin/env python3
"""The scaling model of simp-server --threads N, from scripts/bench-threads --model's runs in DIR.

DIR holds, for each round K (1..BENCH_ROUNDS), simpload's JSON at one fixed rate:
roundK-t1-any.json (--threads 1), roundK-t2-same.json (--threads 2, every receiver on its
sender's loop) and roundK-t2-cross.json (--threads 2, every receiver on the other loop). From the
relay's CPU per delivered message (medians over the rounds):
  c_local   = two loops, same placement: a loop forwarding to its own sessions
  c_handoff = two loops, cross minus same: what handing a message (and its receipt) to another
              loop adds
and N loops on N free cores would sustain N / (c_local + p_cross(N) * c_handoff) messages a
second, p_cross(N) = (N-1)/N when the kernel's hash places sessions (a conversation's two users
on different loops that often), 0 when a conversation's users are pinned to one loop.
"""
import json
import os
import statistics
import sys

LOOPS = (1, 2, 4, 8, 16, 32)
RUNS = {"one_loop": "t1-any", "same": "t2-same", "cross": "t2-cross"}


def p_cross_hashed(loops):
    """The share of messages whose receiver is on another loop, sessions placed at random."""
    return (loops - 1) / loops


def sustained_rate(loops, c_local_us, c_handoff_us, p_cross):
    """Messages a second `loops` loops sustain on as many free cores."""
    return loops / ((c_local_us + p_cross * c_handoff_us) * 1e-6)


def cpu_per_message(report):
    """The relay's CPU per delivered message (µs) and each busy thread's share of it."""
    messages = report["delivered_rate"] * report["parameters"]["duration_s"]
    relay = report["relay"]
    threads = sorted((t["cpu_seconds"] * 1e6 / messages for t in relay.get("threads", [])), reverse=True)
    return relay["cpu_seconds"] * 1e6 / messages, threads


def model(directory, rounds):
    measured = {name: [] for name in RUNS}
    per_thread = {name: [] for name in RUNS}
    cross_pairs = []
    for round_ in range(1, rounds + 1):
        for name, suffix in RUNS.items():
            with open(os.path.join(directory, f"round{round_}-{suffix}.json")) as file:
                report = json.load(file)
            total, threads = cpu_per_message(report)
            measured[name].append(total)
            per_thread[name].append(threads)
            if name == "cross":
                cross_pairs.append((report.get("cross_loop_pairs"), report["parameters"]["pairs"]))
    c = {name: statistics.median(values) for name, values in measured.items()}
    c_local, c_handoff = c["same"], c["cross"] - c["same"]
    rows = []
    for loops in LOOPS:
        hashed = sustained_rate(loops, c_local, c_handoff, p_cross_hashed(loops))
        pinned = sustained_rate(loops, c_local, c_handoff, 0)
        rows.append({"loops": loops, "p_cross": p_cross_hashed(loops), "hashed_rate": hashed, "pinned_rate": pinned,
                     "hashed_speedup": hashed / sustained_rate(1, c_local, c_handoff, 0), "pinned_over_hashed": pinned / hashed})
    return {"c_one_loop_us": c["one_loop"], "c_local_us": c_local, "c_handoff_us": c_handoff,
            "measured_us": measured, "per_thread_us": per_thread, "cross_loop_pairs": cross_pairs, "rows": rows}


def main(directory):
    env = os.environ
    result = model(directory, int(env["BENCH_ROUNDS"]))
    result["machine"] = {"nproc": os.cpu_count(), "load_before": env.get("BENCH_LOAD_BEFORE"), "load_after": env.get("BENCH_LOAD")}
    if env.get("BENCH_JSON") == "1":
        print(json.dumps(result, indent=1))
        return
    show = lambda values: ", ".join(f"{v:.1f}" for v in values)
    print(f"relay CPU µs per message, per round: one loop {show(result['measured_us']['one_loop'])}; "
          f"two loops, same loop {show(result['measured_us']['same'])}; two loops, cross {show(result['measured_us']['cross'])}")
    print(f"c_one_loop = {result['c_one_loop_us']:.1f} µs, c_local = {result['c_local_us']:.1f} µs, "
          f"c_handoff = {result['c_handoff_us']:.1f} µs (medians)")
    print()
    print("| loops on free cores | p_cross (hashed) | hashed msg/s | speed-up over 1 | pinned msg/s | pinned ÷ hashed |")
    print("|---|---|---|---|---|---|")
    for row in result["rows"]:
        print(f"| {row['loops']} | {row['p_cross']:.2f} | {row['hashed_rate']:,.0f} | {row['hashed_speedup']:.2f} | "
              f"{row['pinned_rate']:,.0f} | {row['pinned_over_hashed']:.2f} |")
    print(f"load average {env.get('BENCH_LOAD_BEFORE')} -> {env.get('BENCH_LOAD')}")


if __name__ == "__main__":
    main(sys.argv[1])
