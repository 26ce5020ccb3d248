"""``cowboy-runner`` command line.

The runner daemon (sessions, executors, journal) is built on the CIP-11
transport; until then this entry point reports its version and says so
instead of pretending to run.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import PackageNotFoundError, version


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``cowboy-runner`` console script."""
    p = argparse.ArgumentParser(prog="cowboy-runner", description="Cowboy runner daemon")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    args = p.parse_args(argv)
    try:
        v = version("cowboy-node")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        v = "unknown"
    if args.version:
        print(v)
        return 0
    print("cowboy-runner: the runner daemon is not available in this release "
          "(it requires the CIP-11 transport); see README.md", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
