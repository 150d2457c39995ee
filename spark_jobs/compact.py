"""Compaction as a Spark job: ``spark-submit spark_jobs/compact.py TABLE [options]`` (same options as
``lakeops compact``). The plan and the commits run on the driver; each file group is rewritten by one
task. With ``--partial-progress K`` (Delta and Iceberg) groups run and commit K at a time."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from rich.console import Console

from lakeops.ops.options import CompactionOptions
from lakeops.storage import StorageOptions
from spark_jobs.operations import SparkSettings, options_from_args, spark_from_args

if TYPE_CHECKING:
    from lakeops.ops.compaction import CompactionReport
    from lakeops.ops.icechunk.compaction import IcechunkCompactionReport

HELP = (
    "bin-pack small files into larger ones (Delta OPTIMIZE; Iceberg rewrite_data_files, applying deletes; "
    "Icechunk: small chunk objects into shared chunk files)"
)
USES_SPARK = True


class Options(CompactionOptions):
    """The planner's options plus ``dry_run`` (plan and report, change nothing)."""

    dry_run: bool = False


def configure(parser: argparse.ArgumentParser) -> None:
    from spark_jobs.cli import columns_arg, duration_arg, size_arg, where_arg

    defaults = Options()
    parser.add_argument(
        "--target-file-size",
        type=size_arg,
        help="e.g. 128MB (default: table property delta.targetFileSize / write.target-file-size-bytes, "
        "else 128MB for Delta, 512MB for Iceberg)",
    )
    parser.add_argument(
        "--min-input-files",
        type=int,
        default=defaults.min_input_files,
        help=f"smallest group worth rewriting (default {defaults.min_input_files})",
    )
    parser.add_argument(
        "--where",
        type=where_arg,
        help="partition predicate, e.g. \"day >= '2024-01-01' AND region = 'eu'\" (Iceberg: partition field "
        "names, or columns partitioned by identity)",
    )
    parser.add_argument(
        "--max-rewrite-bytes",
        type=size_arg,
        help="rewrite only the first file groups whose input fits this size (at least one): a piece of the "
        "compaction, the rest left for the next run",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    parser.add_argument(
        "--commit-retries",
        type=int,
        metavar="N",
        help="retries of a commit that lost a race, each rebased on the commits that landed first (default: "
        "Iceberg's commit.retry.num-retries, else 10)",
    )
    parser.add_argument(
        "--commit-timeout",
        type=duration_arg,
        metavar="DURATION",
        help="total time those retries may take, e.g. 10m (default: Iceberg's commit.retry.total-timeout-ms, else 30m)",
    )
    parser.add_argument(
        "--partial-progress",
        type=int,
        metavar="K",
        help="commit after every K file groups (Delta: each batch its own OPTIMIZE version; Iceberg: its own "
        "snapshot), so a failure keeps the batches that landed; the error names them and the exit status is 1",
    )
    delta = parser.add_argument_group("Delta")
    delta.add_argument(
        "--dv-purge-ratio",
        type=float,
        default=defaults.dv_purge_ratio,
        help="rewrite files whose deletion vector hides more than this share of rows "
        f"(default {defaults.dv_purge_ratio})",
    )
    delta.add_argument(
        "--zorder-by",
        type=columns_arg,
        metavar="COLUMNS",
        help="rewrite every file of each partition in Z-order of these columns (comma-separated), so files "
        "prune on each of them, as OPTIMIZE ZORDER BY",
    )
    delta.add_argument(
        "--sort-by",
        type=columns_arg,
        metavar="COLUMNS",
        help="rewrite every file of each partition sorted by these columns (comma-separated)",
    )
    iceberg = parser.add_argument_group("Iceberg")
    iceberg.add_argument(
        "--min-file-size", type=size_arg, help="files below this are rewritten (default 75%% of target)"
    )
    iceberg.add_argument("--max-file-size", type=size_arg, help="files above this are split (default 180%% of target)")
    iceberg.add_argument(
        "--delete-file-threshold", type=int, help="rewrite files with at least this many delete files applied"
    )
    iceberg.add_argument(
        "--max-file-group-size",
        type=size_arg,
        default=defaults.max_file_group_size,
        help="largest group one task rewrites (default 100GB)",
    )
    iceberg.add_argument("--sort", action="store_true", help="sort rewritten rows by the table's sort order")
    iceberg.add_argument(
        "--manifest-threshold",
        type=int,
        metavar="N",
        help="read the data manifests in Spark tasks when the plan reads more than N of them (default 200)",
    )
    icechunk = parser.add_argument_group("Icechunk")
    icechunk.add_argument("--branch", default=defaults.branch, help="branch whose tip is packed (default main)")
    iceberg.add_argument(
        "--keep-dangling-deletes",
        dest="remove_dangling_deletes",
        action="store_false",
        help="keep delete files that no longer apply to any data file (default: remove them)",
    )


def run(
    args: argparse.Namespace, storage_options: StorageOptions, progress: Console
) -> CompactionReport | IcechunkCompactionReport:
    """``lakeops compact``: :func:`execute` with the parsed options."""
    return execute(
        args.table, options_from_args(Options, args), storage_options, spark=spark_from_args(args), progress=progress
    )


def execute(
    table: str, options: Options, storage_options: StorageOptions, *, spark: SparkSettings, progress: Console
) -> CompactionReport | IcechunkCompactionReport:
    """:func:`lakeops.api.compact`, its groups rewritten on Spark (or the driver, as ``spark`` decides)."""
    from lakeops import api

    return api.compact(
        table, options, dry_run=options.dry_run, storage_options=storage_options, executor=spark, progress=progress
    )


if __name__ == "__main__":
    from spark_jobs.cli import main

    sys.exit(main(only="compact"))
