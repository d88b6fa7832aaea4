"""`python -m tests.mutation [-j JOBS] [-k SUBSTRING] [TEST PATH ...]`: run the mutations and print the report table."""
from __future__ import annotations

import argparse
import sys
import time

from .mutations import MUTATIONS
from .runner import SELECTION, accepted, control_ok, report, run_all


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__)
    ap.add_argument("-j", "--jobs", type=int, default=2, help="mutations run at once (default 2)")
    ap.add_argument("-k", dest="only", default="", help="only mutations whose id contains this")
    ap.add_argument("tests", nargs="*", help="test selection for every mutation and the control (default: each "
                    f"mutation the tests of its targets, the control all of them: {' '.join(SELECTION)})")
    args = ap.parse_args(argv)
    mutations = [m for m in MUTATIONS if args.only in m.id]
    start = time.monotonic()
    control, results = run_all(mutations, tuple(args.tests) or None, jobs=args.jobs)
    print(report(control, results))
    print(f"\n{len(results)} mutations, {time.monotonic() - start:.0f} s with {args.jobs} jobs")
    ok = control_ok(control) and all(accepted(r) for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
