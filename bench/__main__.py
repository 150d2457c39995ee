"""``python -m bench --size tiny|quick|full [--case NAME ...] [--scale N ...] [--repeats N]``."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench.cases import BY_NAME
from bench.harness import TIERS, run
from bench.report import update_readme, write_json

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--size", choices=list(TIERS), default="quick")
    parser.add_argument("--case", action="append", choices=list(BY_NAME), help="run only this case (repeatable)")
    parser.add_argument(
        "--scale",
        type=int,
        action="append",
        help="run only this multiple of the base size (repeatable; full: 1, 4, 16)",
    )
    parser.add_argument("--repeats", type=int, help="runs per contender (default: 1 tiny, 3 otherwise)")
    parser.add_argument("--workdir", type=Path, help="where workloads are generated (default: a temp dir)")
    parser.add_argument("--results", type=Path, default=HERE / "results", help="directory of the JSON results")
    parser.add_argument("--readme", type=Path, default=HERE / "README.md", help="README whose table is replaced")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lakeops-bench-", dir=args.workdir) as base:
        document = run(
            args.size,
            cases=args.case,
            repeats=args.repeats,
            scales=args.scale,
            base=Path(base),
            partial=lambda so_far: write_json(args.results, so_far),
        )
    path = write_json(args.results, document)
    update_readme(args.readme, document)
    print(f"results: {path}\nsummary: {args.readme}")


if __name__ == "__main__":
    main()
