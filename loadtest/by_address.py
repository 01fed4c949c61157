"""scripts/load_test.py --addresses N[,N...]: the visitors by network address (loadtest/scenarios.py) on one
app: the engines loaded once, each prompt's solo run once, then one crowd per N, each with its checks and
its report (one-address for N=1, addresses otherwise)."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

from loadtest import app as the_app
from loadtest import scenarios
from loadtest import visitors as vis


def scenario_name(n_addresses: int) -> str:
    return "one-address" if n_addresses == 1 else "addresses"


def counts(value: str) -> list[int]:
    """--addresses "1,50" -> [1, 50]."""
    out = [int(v) for v in str(value).split(",") if v.strip()]
    if not out or min(out) < 1:
        raise ValueError(f"--addresses: {value!r} is not a list of counts of at least 1")
    return out


def run_test(args, app, report: dict) -> None:
    """The solo runs, then each scenario's crowd into report["scenarios"][name]."""
    url = report["url"] = f"http://127.0.0.1:{app.port}/"
    t0 = time.time()
    c = the_app.wait_ready(url, app, t0 + args.ready_timeout)
    report["app_ready_s"] = round(time.time() - t0, 1)
    prompts = vis.visitor_prompts(args.visitors)
    solo = the_app.solo_phase(args, c, prompts, report)
    report["scenarios"] = {}
    for n in counts(args.addresses):
        name = scenario_name(n)
        report["scenarios"][name] = scenario = crowd(args, url, prompts, solo, n, app.pid)
        print(f"{name}: {json.dumps({k: v for k, v in scenario['load'].items() if k != 'fifo'})}", flush=True)


def crowd(args, url: str, prompts: list[str], solo: dict, n_addresses: int, app_pid: int) -> dict:
    """One crowd from `n_addresses` addresses, followed to the end (refused visitors retrying)."""
    from specplay.hosting.guard import ADDRESS_FULL, ADDRESS_PENDING

    visitors = scenarios.AddressVisitors(url, prompts, args.max_tokens, n_addresses, args.schedule,
                                         retry_s=args.retry_s)
    out: dict = {"addresses": n_addresses, "address_pending_limit": ADDRESS_PENDING}
    try:
        visitors.connect()
        cpu_before = the_app.cpu_seconds(app_pid)
        t0 = time.time()
        visitors.start(spacing_s=args.spacing_ms / 1000 if args.spacing_ms > 0 else None)
        out["clicks_s"] = round(time.time() - t0, 2)
        visitors.watch(t0 + args.deadline_s)
        out["cpu_seconds_during_load"] = the_app.cpu_used(cpu_before, the_app.cpu_seconds(app_pid), time.time() - t0)
        load = out["load"] = scenarios.summary(visitors.visits, solo, ADDRESS_FULL)
        out["rows"] = [scenarios.row(v, t0, solo[v.prompt]) for v in visitors.visits]
    finally:
        visitors.close()
    out["checks"] = checks(load, len(prompts), n_addresses, ADDRESS_PENDING)
    return out


def checks(load: dict, n: int, n_addresses: int, address_pending: int) -> dict:
    """Nothing lost: every visitor served its own run (its solo run's tokens), every refusal in words; one
    address: the page never queued more than its few from it and refused the rest; an address each: no
    refusal, first come first served."""
    out = {"no_hang": load["hangs"] == 0, "nothing_lost": load["lost"] == 0,
           "every_visitor_served": load["served"] == n,
           "every_output_equals_its_solo_run": load["equal_to_solo"] == n,
           "every_refusal_carries_the_message": load["refusals_with_the_message"] == load["refusals"]}
    if n_addresses == 1:
        out["at_most_the_address_limit_queued"] = load["largest_queue_reported"] <= address_pending
        out["the_rest_refused"] = n <= address_pending or load["visitors_refused"] > 0
    elif n_addresses >= n:
        out["no_refusal"] = load["refusals"] == 0
        out["fifo_kept"] = load["fifo_kept"]
    return out


def reports(report: dict, out_pattern: str) -> list[tuple[Path, dict]]:
    """One report per scenario (the shared part: command, machine, settings, solo runs, the app's stop),
    written where `out_pattern` says ({scenario} replaced); without scenarios (it failed before), the one."""
    shared = {k: v for k, v in report.items() if k != "scenarios"}
    found = report.get("scenarios") or {}
    if not found:
        return [(Path(out_pattern.replace("{scenario}", "by-address")).resolve(), shared)]
    out = []
    for name, scenario in found.items():
        one = copy.deepcopy(shared)
        one["scenario"] = name
        one.update({k: v for k, v in scenario.items() if k != "checks"})
        one["checks"] = {**shared["checks"], **scenario["checks"]}
        out.append((Path(out_pattern.replace("{scenario}", name)).resolve(), one))
    return out
