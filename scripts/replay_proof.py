"""Record a 4-validator run with one checkout's code, replay every validator's store with other checkouts' code.

A refactoring that claims "behaviour unchanged, byte for byte" (issue 32) is checked here on a real network: the
validators of ``--record`` commit a few thousand transfers; then ``cowboy-node replay`` re-executes each validator's
stored chain from genesis with the code of each ``--replay`` checkout, which verifies every block (header checks,
transactions, receipts) and compares every state root with the one in its header. The report lists, per replaying
checkout and validator, the last height and state root; every replay must succeed and all must agree.

    python scripts/replay_proof.py --record /work/main --replay /work/main /work/wt-base

Exit status 0 when the run had no error and every replay succeeded with the same (height, root) for a
validator's store under every checkout; 1 otherwise. Prints one JSON report.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.chain_throughput_network import _defaults, _with_pythonpath  # noqa: E402


def _replay(code: Path, home: Path, timeout: float) -> dict[str, Any]:
    """``cowboy-node replay --home HOME`` with ``code`` first on the import path; its JSON answer."""
    env = dict(os.environ, PYTHONPATH=str(code))
    cmd = [sys.executable, "-c", "import sys; from cowboy_node.cli.main import main; sys.exit(main())",
           "replay", "--home", str(home)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"ok": False, "error": f"exit {done.returncode}: {done.stderr.strip()[-500:]}"}
    answer: dict[str, Any] = json.loads(lines[-1])
    return answer


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--record", type=Path, required=True, help="checkout whose validators record the run")
    ap.add_argument("--replay", type=Path, nargs="+", required=True, help="checkouts that replay every store")
    ap.add_argument("--txs", type=int, default=3_000, help="transfers submitted during the run")
    ap.add_argument("--validators", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds allowed to each replay")
    args = ap.parse_args()
    run = _with_pythonpath(str(args.record.resolve()), _defaults(validators=args.validators, net_txs=args.txs,
                                                                  net_keep=True, net_timeout=240.0))
    report: dict[str, Any] = {"record": str(args.record), "txs": args.txs, "included": run.get("included"),
                              "blocks": run.get("blocks"), "run_error": run.get("error"), "replays": {}}
    homes_dir = run.get("homes")
    ok = homes_dir is not None and "error" not in run
    try:
        if homes_dir is not None:
            homes = sorted(p for p in (Path(homes_dir) / "testnet").iterdir() if p.name.startswith("validator-"))
            for code in args.replay:
                answers = {h.name: _replay(code.resolve(), h, args.timeout) for h in homes}
                report["replays"][str(code)] = answers
            per_home: dict[str, set[tuple[Any, Any]]] = {}
            for answers in report["replays"].values():
                for name, a in answers.items():
                    ok = ok and bool(a.get("ok"))
                    per_home.setdefault(name, set()).add((a.get("height"), a.get("state_root")))
            ok = ok and bool(per_home) and all(len(s) == 1 for s in per_home.values())
            report["per_validator"] = {k: sorted(map(list, v)) for k, v in per_home.items()}
    finally:
        if homes_dir is not None:
            shutil.rmtree(homes_dir, ignore_errors=True)
    report["ok"] = ok
    print(json.dumps(report, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
