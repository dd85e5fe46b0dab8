#!/usr/bin/env python3
"""The table (or JSON object) of scripts/bench-compare, from the JSON each run left in DIR.

DIR holds udp.json and udp-rate.json (udplimit as fast as it goes and at the fixed rate), mqtt-max.json and mqtt-rate.json (mqttbench), simp-max.json and
simp-rate.json (simp-bench --json), simpload-max.json and simpload-rate.json, simp-tcp-max.json and simp-tcp-rate.json
(simp-bench --tcp-path; optional), and simpload-max-nowake.json (simpload --find-max --no-wake-on-arrival; optional); the
run's parameters come from BENCH_* environment variables.
"""
import json
import os
import platform
import sys


def load(directory, name):
    with open(os.path.join(directory, name)) as file:
        return json.load(file)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def simp_row(report):
    """Rate, server and bench CPU per delivered message (µs), latency of one simp-bench report."""
    seconds = report["parameters"]["duration_s"]
    delivered = report["delivered_rate"] * seconds
    relay_cpu = (report.get("relay") or {}).get("cpu_seconds")
    bench_cpu = report.get("bench_cpu_seconds")
    per = lambda cpu: cpu * 1e6 / delivered if cpu is not None and delivered > 0 else None
    latency = report["latency_us"]
    measured = latency["count"] > 0
    return {"delivered_rate": report["delivered_rate"], "server_cpu_us_per_message": per(relay_cpu),
            "bench_cpu_us_per_message": per(bench_cpu), "p50_us": latency["p50"] if measured else None,
            "p99_us": latency["p99"] if measured else None}


def mqtt_row(report):
    delivered = report["delivered_rate"] * report["seconds"]
    return {"delivered_rate": report["delivered_rate"], "server_cpu_us_per_message": report["broker_cpu_us_per_message"],
            "bench_cpu_us_per_message": report["bench_cpu_seconds"] * 1e6 / delivered if delivered else None,
            "p50_us": report["p50_us"], "p99_us": report["p99_us"]}


def ratio(a, b):
    return a / b if a is not None and b else None


def main(directory):
    env = os.environ
    rate = float(env["BENCH_RATE"])
    udp, udp_rate = load(directory, "udp.json"), load(directory, "udp-rate.json")
    mqtt_max, mqtt_rate = mqtt_row(load(directory, "mqtt-max.json")), mqtt_row(load(directory, "mqtt-rate.json"))
    simp_max_report, simp_rate = load(directory, "simp-max.json"), simp_row(load(directory, "simp-rate.json"))
    load_max_report, load_rate = load(directory, "simpload-max.json"), simp_row(load(directory, "simpload-rate.json"))
    simp_max, simp_best = find_max_row(simp_max_report, simp_rate)
    load_max, load_best = find_max_row(load_max_report, load_rate)
    rows = [
        {"system": "raw UDP forwarding (udplimit, C, recvmmsg/sendmmsg)", "max_rate": udp["delivered_rate"],
         "best_rate": udp["delivered_rate"],
         "max_p99_us": None, "max_server_cpu_us_per_message": udp["forwarder_cpu_us_per_datagram"],
         "max_bench_cpu_us_per_message": None,
         "at_rate": {"delivered_rate": udp_rate["delivered_rate"], "server_cpu_us_per_message": udp_rate["forwarder_cpu_us_per_datagram"],
                     "bench_cpu_us_per_message": None, "p50_us": None, "p99_us": None},
         "limit_cpu_us_per_datagram": udp["forwarder_cpu_us_per_datagram"],
         "note": "CPU: forwarder thread, datagrams evenly spaced at the fixed rate"},
        {"system": "mosquitto QoS 1 (mqttbench, libmosquitto, inflight 100)", "max_rate": mqtt_max["delivered_rate"],
         "best_rate": mqtt_max["delivered_rate"], "max_p99_us": mqtt_max["p99_us"], **at_max(mqtt_max), "at_rate": mqtt_rate,
         "note": "CPU: broker process"},
        {"system": f"SIMP relay (simp-bench, receipted; {simp_setup(simp_max_report)})", "max_rate": simp_max["delivered_rate"],
         "best_rate": simp_best, "max_p99_us": simp_max["p99_us"], **at_max(simp_max), "at_rate": simp_rate, "note": "CPU: relay process"},
        {"system": f"SIMP relay (simpload, C client, receipted; {simp_setup(load_max_report, 'thread')})",
         "max_rate": load_max["delivered_rate"], "best_rate": load_best, "max_p99_us": load_max["p99_us"], **at_max(load_max),
         "at_rate": load_rate, "note": "CPU: relay process"},
    ]
    nowake = None
    if os.path.exists(os.path.join(directory, "simpload-max-nowake.json")):
        nowake_report = load(directory, "simpload-max-nowake.json")
        nowake, _ = find_max_row(nowake_report, load_rate)
        rows.append({"system": f"SIMP relay (simpload --no-wake-on-arrival; {simp_setup(nowake_report, 'thread')})",
                     "max_rate": nowake["delivered_rate"], "best_rate": max(step["delivered_rate"] for step in nowake_report.get("steps") or [nowake]),
                     "max_p99_us": nowake["p99_us"], **at_max(nowake), "at_rate": None,
                     "note": "CPU: relay process; receivers read once a tick, so the relay's sends wake no one"})
    tcp = None
    if os.path.exists(os.path.join(directory, "simp-tcp-max.json")):
        tcp_max_report, tcp_rate = load(directory, "simp-tcp-max.json"), simp_row(load(directory, "simp-tcp-rate.json"))
        tcp_max, tcp_best = find_max_row(tcp_max_report, tcp_rate)
        tcp = {"max": tcp_max, "rate": tcp_rate}
        rows.append({"system": f"SIMP relay, TCP path (simp-bench --tcp-path, receipted; {simp_setup(tcp_max_report)})",
                     "max_rate": tcp_max["delivered_rate"], "best_rate": tcp_best, "max_p99_us": tcp_max["p99_us"], **at_max(tcp_max),
                     "at_rate": tcp_rate,
                     "note": "CPU: relay process; datagrams in DATAGRAM frames on the control connections"})
    ratios = [
        {"name": "relay CPU/msg ÷ mosquitto broker CPU/msg (light generators: simpload, mqttbench)",
         "value": ratio(load_rate["server_cpu_us_per_message"], mqtt_rate["server_cpu_us_per_message"]), "bar": "<= 0.4"},
        {"name": "SIMP max rate (simpload) ÷ mosquitto delivered rate", "value": ratio(load_max["delivered_rate"], mqtt_max["delivered_rate"]),
         "bar": ">= 3"},
        {"name": "SIMP max rate (simpload) ÷ raw-UDP forwarding limit", "value": ratio(load_max["delivered_rate"], udp["delivered_rate"]),
         "bar": ">= 0.75"},
        {"name": "relay CPU/msg under simp-bench ÷ mosquitto broker CPU/msg",
         "value": ratio(simp_rate["server_cpu_us_per_message"], mqtt_rate["server_cpu_us_per_message"]), "bar": None},
        {"name": "SIMP max rate (simp-bench) ÷ mosquitto delivered rate", "value": ratio(simp_max["delivered_rate"], mqtt_max["delivered_rate"]),
         "bar": None},
        {"name": "SIMP max rate (simp-bench) ÷ raw-UDP forwarding limit", "value": ratio(simp_max["delivered_rate"], udp["delivered_rate"]),
         "bar": None},
        {"name": f"raw-UDP forwarder CPU/datagram at {rate:,.0f}/s ÷ mosquitto broker CPU/msg",
         "value": ratio(udp_rate["forwarder_cpu_us_per_datagram"], mqtt_rate["server_cpu_us_per_message"]), "bar": None},
        {"name": "SIMP best delivered rate (any latency, either client) ÷ mosquitto's",
         "value": ratio(max(simp_best, load_best), mqtt_max["delivered_rate"]), "bar": None},
        {"name": f"SIMP p50 latency at {rate:,.0f} msg/s (µs)", "value": simp_rate["p50_us"], "bar": "<= 150"},
        {"name": f"SIMP p99 latency at {rate:,.0f} msg/s (µs)", "value": simp_rate["p99_us"], "bar": "<= 1000"},
    ]
    if nowake:
        ratios += [
            {"name": "SIMP max rate (simpload --no-wake-on-arrival) ÷ mosquitto delivered rate",
             "value": ratio(nowake["delivered_rate"], mqtt_max["delivered_rate"]), "bar": None},
            {"name": "SIMP max rate (simpload --no-wake-on-arrival) ÷ raw-UDP forwarding limit",
             "value": ratio(nowake["delivered_rate"], udp["delivered_rate"]), "bar": None},
        ]
    if tcp:
        ratios += [
            {"name": "TCP path ÷ UDP: max rate (simp-bench find-max)", "value": ratio(tcp["max"]["delivered_rate"], simp_max["delivered_rate"]),
             "bar": None},
            {"name": f"TCP path ÷ UDP: delivered rate at {rate:,.0f} msg/s",
             "value": ratio(tcp["rate"]["delivered_rate"], simp_rate["delivered_rate"]), "bar": None},
            {"name": f"TCP path ÷ UDP: p50 latency at {rate:,.0f} msg/s", "value": ratio(tcp["rate"]["p50_us"], simp_rate["p50_us"]),
             "bar": None},
            {"name": f"TCP path ÷ UDP: p99 latency at {rate:,.0f} msg/s", "value": ratio(tcp["rate"]["p99_us"], simp_rate["p99_us"]),
             "bar": None},
            {"name": f"TCP path ÷ UDP: relay CPU/msg at {rate:,.0f} msg/s",
             "value": ratio(tcp["rate"]["server_cpu_us_per_message"], simp_rate["server_cpu_us_per_message"]), "bar": None},
            {"name": f"SIMP TCP-path p50 latency at {rate:,.0f} msg/s (µs)", "value": tcp["rate"]["p50_us"], "bar": None},
            {"name": f"SIMP TCP-path p99 latency at {rate:,.0f} msg/s (µs)", "value": tcp["rate"]["p99_us"], "bar": None},
        ]
    for item in ratios:
        if item["bar"] is None:
            item["met"] = None
            continue
        op, limit = item["bar"].split()
        value = item["value"]
        item["met"] = value is not None and (value >= float(limit) if op == ">=" else value <= float(limit))
    machine = {"nproc": os.cpu_count(), "cpu_model": cpu_model(), "kernel": env.get("BENCH_KERNEL", ""),
               "load_average_before": env.get("BENCH_LOAD_BEFORE", ""), "load_average_after": env.get("BENCH_LOAD", ""),
               "mosquitto": env.get("BENCH_MOSQUITTO", "")}
    parameters = {"pairs": int(env["BENCH_PAIRS"]), "size": int(env["BENCH_SIZE"]), "seconds": float(env["BENCH_SECONDS"]),
                  "rate": rate}
    if env.get("BENCH_JSON") == "1":
        print(json.dumps({"machine": machine, "parameters": parameters, "rows": rows, "ratios": ratios}, sort_keys=True))
        return
    print_table(machine, parameters, rows, ratios)


def find_max_row(max_report, rate_row):
    """The find-max row of a simp-bench or simpload report, and the best rate delivered at all."""
    row = simp_row(max_report)
    # The rate delivered at the highest sustained step (not the step's nominal target).
    steps = max_report.get("steps") or []
    row["delivered_rate"] = max((step["delivered_rate"] for step in steps if step.get("sustained")), default=0)
    # The highest rate delivered in any find-max step or the fixed-rate run, whatever its
    # latency: the figure to set beside mosquitto's closed-loop rate, which has no latency limit.
    best = max([step["delivered_rate"] for step in steps] + [rate_row["delivered_rate"]])
    return row, best


def at_max(row):
    """The server's and the load generator's CPU per message at a row's max rate (µs)."""
    return {"max_server_cpu_us_per_message": row["server_cpu_us_per_message"], "max_bench_cpu_us_per_message": row["bench_cpu_us_per_message"]}


def simp_setup(report, unit="event loop"):
    """How simp-bench (or simpload) ran: its event loops (threads) and how its receivers sent receipts."""
    parameters = report["parameters"]
    loops = parameters.get("loops", 1)
    delay_us = parameters.get("receipt_delay_us", 0)
    held = f"receipts held up to {delay_us / 1000:g} ms" if delay_us else "receipts per read burst"
    copies = " + datagram copies" if parameters.get("receipt_datagrams") else ""
    window = f", window {parameters['window']}" if "window" in parameters else ""
    return f"{loops} {unit}{'' if loops == 1 else 's'}, {held}{copies}{window}"


def number(value, digits=0):
    return "—" if value is None else f"{value:,.{digits}f}"


def print_table(machine, parameters, rows, ratios):
    rate = parameters["rate"]
    print(f"machine: {machine['nproc']} × {machine['cpu_model']}, Linux {machine['kernel']}, "
          f"load average {machine['load_average_before']} before, {machine['load_average_after']} after")
    print(f"parameters: {parameters['pairs']} pairs, {parameters['size']} B messages, loopback, "
          f"{parameters['seconds']:g} s windows, fixed rate {rate:,.0f} msg/s")
    header = ["", "max msg/s", "p99 µs at max", "server CPU µs/msg at max", "generator CPU µs/msg at max", "best msg/s, any p99",
              f"msg/s at {rate:,.0f}", "server CPU µs/msg", "bench CPU µs/msg", "p50 µs", "p99 µs"]
    cells = [[row["system"], number(row["max_rate"]), number(row["max_p99_us"]), number(row["max_server_cpu_us_per_message"], 1),
              number(row["max_bench_cpu_us_per_message"], 1), number(row["best_rate"])] +
             [number((row["at_rate"] or {}).get(key), digits) for key, digits in
              [("delivered_rate", 0), ("server_cpu_us_per_message", 1), ("bench_cpu_us_per_message", 1), ("p50_us", 0), ("p99_us", 0)]]
             for row in rows]
    widths = [max(len(line[column]) for line in [header] + cells) for column in range(len(header))]
    for line in [header] + cells:
        print("  ".join(cell.ljust(width) if column == 0 else cell.rjust(width)
                        for column, (cell, width) in enumerate(zip(line, widths))))
    print("max: SIMP with p99 <= 10 ms (find-max), mosquitto as fast as inflight 100 allows, raw UDP as fast as it goes;")
    print("CPU at max: per delivered message in the highest sustained step (raw UDP: the forwarder thread at its limit, no generator")
    print("figure), server and load generator sharing the cores; a generator heavier than the server starves it;")
    print("SIMP's max-rate and CPU bars use simpload (light generators on both sides), its latency bars simp-bench's fixed-rate run;")
    print("server CPU at the fixed rate: raw UDP the forwarder thread (each datagram passed on as it arrives; "
          f"{number(rows[0]['limit_cpu_us_per_datagram'], 1)} µs at its limit),")
    print("mosquitto the broker process, SIMP the relay process; SIMP's TCP path: the same simp-bench pairs with their datagrams")
    print("in DATAGRAM frames on the control connections (clients whose network blocks UDP), beside the UDP pairs")
    print()
    width = max(len(item["name"]) for item in ratios)
    for item in ratios:
        value = item["value"]
        whole = "(µs)" in item["name"] or value is None or value >= 100
        shown = "—" if value is None else (f"{value:,.0f}" if whole else f"{value:.2f}")
        verdict = "(information)" if item["bar"] is None else f"bar {item['bar']:<8}  {'met' if item['met'] else 'NOT met'}"
        print(f"{item['name'].ljust(width)}  {shown:>8}  {verdict}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: bench-compare-report.py DIR (called by scripts/bench-compare)")
    main(sys.argv[1])
