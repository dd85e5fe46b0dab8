#!/usr/bin/env python3
"""The table (or JSON object) of scripts/bench-relays, from what its runs left in DIR.

For each round K (1..BENCH_ROUNDS) and MODE (one: sender and receiver on relay A; two: sender on
A, receiver on B): roundK-MODE-max.json (simpload --find-max), roundK-MODE-rate.json (simpload at
the fixed rate, with relay A's, relay B's and Redis's CPU), and roundK-MODE-{before,after}-{a,b}.txt
(each relay's /metrics around the fixed-rate run). The bar: two relays' max rate >= 0.8 x one's.
"""
import json
import os
import statistics
import sys

BAR = 0.8
COUNTERS = {
    "redis_calls": "simp_redis_calls_total",
    "forwarded": "simp_datagrams_forwarded_total",
    "published": "simp_relay_deliveries_published_total",
    "received_from_relays": "simp_relay_deliveries_received_total",
}


def load(directory, name):
    with open(os.path.join(directory, name)) as file:
        return json.load(file)


def counters(path):
    """The counters of one Prometheus text exposition (labelled series summed); missing: 0."""
    values = dict.fromkeys(COUNTERS.values(), 0.0)
    with open(path) as file:
        for line in file:
            if line.startswith("#") or not line.strip():
                continue
            name, _, value = line.rpartition(" ")
            name = name.split("{", 1)[0]
            if name in values:
                values[name] += float(value)
    return values


def metrics_delta(directory, prefix):
    """What both relays counted during the fixed-rate run (after minus before, A plus B)."""
    total = dict.fromkeys(COUNTERS, 0.0)
    for relay in ("a", "b"):
        before = counters(os.path.join(directory, f"{prefix}-before-{relay}.txt"))
        after = counters(os.path.join(directory, f"{prefix}-after-{relay}.txt"))
        for key, name in COUNTERS.items():
            total[key] += after[name] - before[name]
    return total


def cpu(report, key):
    return (report.get(key) or {}).get("cpu_seconds")


def per_message(seconds, messages):
    return seconds * 1e6 / messages if seconds is not None and messages > 0 else None


def ratio(a, b):
    return a / b if a is not None and b else None


def run(directory, round_, mode):
    """One mode of one round: its max rate, and its fixed-rate run's CPU and Redis traffic."""
    prefix = f"round{round_}-{mode}"
    find_max, fixed = load(directory, f"{prefix}-max.json"), load(directory, f"{prefix}-rate.json")
    messages = fixed["delivered_rate"] * fixed["parameters"]["duration_s"]
    relay_a, relay_b, redis = cpu(fixed, "relay"), cpu(fixed, "receiver_relay"), cpu(fixed, "redis")
    relays = None if relay_a is None else relay_a + (relay_b or 0)
    counted = metrics_delta(directory, prefix)
    return {
        "max_rate": find_max.get("max_sustained_rate", 0),
        "delivered_rate": fixed["delivered_rate"],
        "relay_a_cpu_us_per_message": per_message(relay_a, messages),
        "relay_b_cpu_us_per_message": per_message(relay_b, messages),
        "relays_cpu_us_per_message": per_message(relays, messages),
        "redis_cpu_us_per_message": per_message(redis, messages),
        "p50_us": fixed["latency_us"]["p50"],
        "p99_us": fixed["latency_us"]["p99"],
        "redis_calls_per_forwarded": ratio(counted["redis_calls"], counted["forwarded"]),
        "published_per_redis_call": ratio(counted["published"], counted["redis_calls"]),
        "counted": counted,
    }


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(directory):
    env = os.environ
    rounds = []
    for round_ in range(1, int(env["BENCH_ROUNDS"]) + 1):
        one, two = run(directory, round_, "one"), run(directory, round_, "two")
        rate_ratio = ratio(two["max_rate"], one["max_rate"])
        rounds.append({"round": round_, "first": "one" if round_ % 2 else "two", "one": one, "two": two,
                       "max_rate_ratio": rate_ratio, "met": rate_ratio is not None and rate_ratio >= BAR,
                       "cpu_ratio": ratio(two["relays_cpu_us_per_message"], one["relays_cpu_us_per_message"])})
    summary = {
        "max_rate_ratio": spread(r["max_rate_ratio"] for r in rounds),
        "rounds_met": sum(r["met"] for r in rounds),
        "rounds": len(rounds),
        "bar": BAR,
        "relays_cpu_ratio": spread(r["cpu_ratio"] for r in rounds),
    }
    ratios = summary["max_rate_ratio"]
    summary["met"] = ratios is not None and ratios["median"] >= BAR
    result = {"rounds": rounds, "summary": summary,
              "machine": {"nproc": os.cpu_count(), "load_before": env.get("BENCH_LOAD_BEFORE"), "load_after": env.get("BENCH_LOAD")},
              "parameters": {"rate": float(env.get("BENCH_RATE", "0")), "max_p99_ms": float(env.get("BENCH_MAX_P99_MS", "10"))}}
    if env.get("BENCH_JSON") == "1":
        print(json.dumps(result, indent=1))
        return
    show = lambda v, f="{:,.1f}": "—" if v is None else f.format(v)
    rate = env.get("BENCH_RATE", "?")
    print(f"| round | relays | max msg/s (p99 <= {env.get('BENCH_MAX_P99_MS', '10')} ms) | relay A / B / Redis CPU µs/msg at {rate} msg/s | p50 / p99 µs | Redis round trips per forward | publishes per round trip |")
    print("|---|---|---|---|---|---|---|")
    for r in rounds:
        for mode in (r["first"], "two" if r["first"] == "one" else "one"):
            m = r[mode]
            print(f"| {r['round']} | {1 if mode == 'one' else 2} | {show(m['max_rate'], '{:,.0f}')} | "
                  f"{show(m['relay_a_cpu_us_per_message'])} / {show(m['relay_b_cpu_us_per_message'])} / {show(m['redis_cpu_us_per_message'])} | "
                  f"{show(m['p50_us'], '{:,.0f}')} / {show(m['p99_us'], '{:,.0f}')} | "
                  f"{show(m['redis_calls_per_forwarded'], '{:.3f}')} | {show(m['published_per_redis_call'], '{:.2f}')} |")
    print()
    for r in rounds:
        print(f"round {r['round']}: two relays' max ÷ one relay's = {show(r['max_rate_ratio'], '{:.2f}')} "
              f"(bar >= {BAR}: {'met' if r['met'] else 'NOT met'}); relays' CPU per message two ÷ one = {show(r['cpu_ratio'], '{:.2f}')}")
    if ratios:
        print(f"median ratio {ratios['median']:.2f} (range {ratios['min']:.2f}-{ratios['max']:.2f}), "
              f"met in {summary['rounds_met']} of {summary['rounds']} rounds; load average {env.get('BENCH_LOAD_BEFORE')} -> {env.get('BENCH_LOAD')}")


if __name__ == "__main__":
    main(sys.argv[1])
