"""One-shot scrapy-rep demo: start the local demo site, crawl it, print what happened.

    python example_project/run_demo.py [--show-logs] [--json FILE] [--report FILE]

Runs three spiders of the ``demo`` project as ``scrapy crawl`` subprocesses from
``example_project/`` (a real project run: scrapy.cfg, demo/settings.py), in parallel:

* ``tour``: every origin, with the project-wide token DemoBot (ROBOTSTXT_USER_AGENT),
  plus one request with ``meta={"robotstxt_user_agent": "PressBot"}``;
* ``nightowl``: the ``rules`` origin, with the spider attribute ``robotstxt_user_agent``;
* ``archive``: the ``rules`` origin, with ``custom_settings["ROBOTSTXT_USER_AGENT"]``.

Then it prints the robots.txt requests the site received, each spider's downloaded,
dropped (with the deciding robots.txt line) and delayed requests, the verdicts per
product token, and a per-origin summary. Offline: everything is on 127.0.0.1.

Every crawl writes its compliance record (REP_RECORD, docs/record.md); the demo then
checks them with ``scrapy robots verify`` and writes their HTML report with ``scrapy
robots report`` (``--report``, default ``compliance-report.html`` in the current
directory).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from demo.report import format_origins, format_spider, format_verdicts  # noqa: E402
from demo_site import DemoSite, Hit  # noqa: E402

SPIDERS = ("tour", "nightowl", "archive")
CRAWL_TIMEOUT = 90  # seconds; the whole demo takes well under 10 s
SUMMARY_MARK = "scrapy-rep summary:"


def crawl_env() -> dict[str, str]:
    env = dict(os.environ)
    # The crawls must use this project's settings (scrapy.cfg), whatever the caller's
    # shell selected.
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    env.pop("SCRAPY_PROJECT", None)
    # Lets the demo also run from a plain checkout where scrapy-rep is not installed
    # (an installed copy, editable or not, is the same code).
    if (REPO_ROOT / "scrapy_rep" / "__init__.py").is_file():
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
    return env


def run_crawls(site_file: Path, workdir: Path) -> dict[str, dict[str, Any]]:
    """Run every spider; return {spider: {"returncode", "log", "ledger"}}."""
    env = crawl_env()
    running = {}
    for name in SPIDERS:
        ledger = workdir / f"{name}.json"
        log = (workdir / f"{name}.log").open("w+", encoding="utf-8")
        command = [
            sys.executable,
            "-m",
            "scrapy",
            "crawl",
            name,
            "-a",
            f"site={site_file}",
            "-s",
            f"DEMO_LEDGER={ledger}",
            "-s",
            f"REP_RECORD={workdir / 'records' / '%(name)s.jsonl.gz'}",
        ]
        print(f"  $ scrapy crawl {name} -a site=... -s DEMO_LEDGER=...", flush=True)
        process = subprocess.Popen(
            command, cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT, text=True
        )
        running[name] = (process, log, ledger)
    results = {}
    deadline = time.monotonic() + CRAWL_TIMEOUT
    for name, (process, log, ledger) in running.items():
        try:
            returncode = process.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            returncode = process.wait()
        log.seek(0)
        results[name] = {
            "returncode": returncode,
            "log": log.read(),
            "ledger": json.loads(ledger.read_text("utf-8")) if ledger.is_file() else None,
        }
        log.close()
    return results


def record_tools(records: list[Path], report: Path) -> str:
    """``scrapy robots verify`` and ``scrapy robots report`` on the crawls' records."""
    out = []
    for args in (["verify"], ["report", "-o", str(report)]):
        done = subprocess.run(
            [sys.executable, "-m", "scrapy", "robots", "--nolog", *args, *map(str, records)],
            cwd=HERE,
            env=crawl_env(),
            capture_output=True,
            text=True,
            timeout=CRAWL_TIMEOUT,
            check=False,
        )
        out.append(f"$ scrapy robots {' '.join(args)} <{len(records)} record files>")
        out.append((done.stdout + done.stderr).rstrip())
    return "\n".join(out)


def robots_answers(hits: list[Hit]) -> dict[str, str]:
    """role -> what the site answered to robots.txt, e.g. "503, 200" or "301 > 302 > 200"."""
    by_role: dict[str, list[Hit]] = {}
    for hit in hits:
        # The cdn port only serves the redirect origin's hops: show them there.
        by_role.setdefault("redirect" if hit.role == "cdn" else hit.role, []).append(hit)
    answers = {}
    for role, role_hits in by_role.items():
        statuses = [str(hit.status) for hit in role_hits]
        if role == "redirect":
            text = " > ".join(statuses)
        elif len(set(statuses)) == 1 and len(statuses) > 1:
            text = f"{statuses[0]} (x{len(statuses)})"
        else:
            text = ", ".join(statuses)
        slowest = max(hit.took for hit in role_hits)
        if slowest >= 0.5:
            text += f" after {slowest:.1f} s"
        answers[role] = text
    if any(hit.role == "cdn" for hit in hits):
        answers["cdn"] = "(redirect's hops)"
    return answers


def site_log(site: DemoSite) -> list[str]:
    agents = sorted({hit.user_agent for hit in site.hits})
    # Every spider sends the project's User-Agent header; only the product token that
    # scrapy-rep matches against robots.txt differs between them.
    lines = [f"  (User-Agent header: {', '.join(agents) or '-'})"]
    for hit in sorted(site.hits, key=lambda h: h.at):
        lines.append(
            f"  +{hit.at - site.started_at:5.2f} s  {hit.role:<8} {hit.path:<18} {hit.status}"
            f"  answered in {hit.took:.2f} s"
        )
    return lines


def summary_line(log: str) -> str | None:
    for line in log.splitlines():
        if SUMMARY_MARK in line:
            return line[line.index(SUMMARY_MARK) :]
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--show-logs", action="store_true", help="print each crawl's full log")
    parser.add_argument("--json", type=Path, help="also write everything collected to FILE")
    parser.add_argument(
        "--report",
        type=Path,
        default=Path("compliance-report.html"),
        help="the compliance report to write (default: compliance-report.html)",
    )
    args = parser.parse_args(argv)

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="scrapy-rep-demo-") as tmp, DemoSite() as site:
        workdir = Path(tmp)
        site_file = workdir / "site.json"
        site_file.write_text(json.dumps(site.describe()), "utf-8")
        print("scrapy-rep demo site, one origin per port:")
        for role, url in site.origins.items():
            print(f"  {role:<9} {url}")
        print(f"crawling from {HERE} (REP_STORAGE=memory, REP_RETRY_BACKOFF=1):", flush=True)
        results = run_crawls(site_file, workdir)
        records = sorted((workdir / "records").glob("*.jsonl.gz"))
        checked = record_tools(records, args.report.resolve())
    elapsed = time.monotonic() - started

    failed = [name for name, r in results.items() if r["returncode"] != 0 or not r["ledger"]]
    for name, result in results.items():
        if args.show_logs or name in failed:
            print(f"\n===== log of scrapy crawl {name} (exit code {result['returncode']}) =====")
            print(result["log"].rstrip())

    ledgers = [r["ledger"] for r in results.values() if r["ledger"]]
    print("\n===== robots.txt requests, as the demo site saw them =====")
    print("\n".join(site_log(site)))
    for result in results.values():
        if result["ledger"]:
            print()
            print("\n".join(format_spider(result["ledger"], summary_line(result["log"]))))
    print("\n===== verdicts on the rules origin, by product token =====")
    print("\n".join(format_verdicts(ledgers, site.origins["rules"])))
    print("\n===== per-origin summary (all spiders) =====")
    print("\n".join(format_origins(ledgers, site.origins, robots_answers(site.hits))))
    print("\n===== compliance record (REP_RECORD) =====")
    print(checked.rstrip())
    if "0 mismatched" not in checked:
        failed.append("scrapy robots verify")
    outcome = f"FAILED: {', '.join(failed)}" if failed else "all crawls finished"
    print(f"\ndemo finished in {elapsed:.1f} s; {outcome}")

    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "origins": site.origins,
                    "site_hits": [vars(hit) for hit in site.hits],
                    "spiders": {
                        name: {
                            "returncode": r["returncode"],
                            "summary": summary_line(r["log"]),
                            "ledger": r["ledger"],
                        }
                        for name, r in results.items()
                    },
                },
                indent=1,
            ),
            "utf-8",
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
