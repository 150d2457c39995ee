"""Hostile option values on the command line (issue 19, "Unclear crashes"): every command, fed
malformed durations, sizes, versions, timestamps, predicates, catalog URIs and endpoint URLs, exits 0,
1 with a ``LakeopsError`` message, or 2 with a usage message — never a traceback.

The runs are in-process, as a user's: an exception escaping ``main`` fails the property. Catalog URIs
point at 127.0.0.1:1 (refused at once) or SQLite files under the test's folder, never elsewhere.
Endpoints given in ``$AWS_ENDPOINT_URL`` are malformed or refuse connections at once. Budget:
``LAKEOPS_FUZZ_EXAMPLES`` / 4 (see :mod:`reliability.hostile`); each example is a CLI run.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st
from reliability.hostile import EXAMPLES, FUZZ, must_hold

from lakeops.storage import s3
from spark_jobs.cli import main as lakeops

_NUMBER = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["", "-0", "1.5", "1e3", "nan", "inf", "0x10", "٣", " 7 ", "7" * 40, "9" * 25]),
)
_UNIT = st.sampled_from(["", "d", "s", "ms", "min", "w", "x", "MB", "GiB", "TB", "kb", "days", " d", "d "])
#: Durations and sizes as a hostile user types them: numbers of any size and form, any unit.
amounts = st.one_of(st.builds(lambda n, u: n + u, _NUMBER, _UNIT), st.text(max_size=12))
#: Integers (versions, snapshot ids, counts) as text.
integers = st.one_of(_NUMBER, st.text(max_size=8))
timestamps = st.one_of(
    st.sampled_from(["2024-01-01", "2024-13-01", "99999-01-01", "0001-01-01T00:00:00+14:00", "yesterday", ""]),
    st.text(max_size=20),
)
predicates = st.one_of(
    st.sampled_from(["id >", "nocol = 1", "id = 'a' OR", "id IN ()", "id = '", "((id = 1)", "id = 1e999"]),
    st.text(max_size=20),
)
endpoints = st.one_of(
    st.sampled_from(["localhost:9000", "ftp://x", "http://", "http://[::1", "http://h:port", "https://u:p@@h"]),
    st.builds(lambda s, h: f"{s}{h}", st.sampled_from(["http://", "https://", "", "s3://"]), st.text(max_size=12)),
)

#: Endpoints in the environment are used: only malformed ones, or one refusing connections at once.
env_endpoints = st.sampled_from(
    [
        "localhost:9000",
        "ftp://x",
        "http://",
        "http://[::1",
        "http://h:port",
        "http://127.0.0.1:1",
        "https://u:p@@127.0.0.1:1",
    ]
)


@st.composite
def catalog_uris(draw: st.DrawFn, folder: str) -> str:
    scheme = draw(
        st.sampled_from(["sqlite", "postgresql+psycopg2", "postgresql", "mysql", "nosuchdb", "s3", "", "sqlite+"])
    )
    if scheme == "sqlite":
        name = draw(st.text(alphabet="abc:?@#%/=", max_size=6))
        return draw(st.sampled_from([f"sqlite:///{folder}/{name}.db", f"sqlite://u:p@/{folder}/c.db", "sqlite://"]))
    userinfo = draw(st.sampled_from(["", "u@", "u:p@", "u:p/a@", ":@"]))
    port = draw(st.sampled_from(["1", "", "x", "99999999", "-1"]))
    return f"{scheme}://{userinfo}127.0.0.1:{port}/{draw(st.text(alphabet='abc/?=&', max_size=6))}"


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> str:
    location = tmp_path_factory.mktemp("hostile-options") / "t"
    for day in range(3):
        write_deltalake(str(location), pa.table({"id": [day], "day": [f"2024-01-0{day + 1}"]}), mode="append")
    return str(location)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """``lakeops ARGV``: a clean exit code with a message, whatever the values."""

    def call() -> int:
        try:
            return lakeops(argv)
        except SystemExit as usage:  # argparse: a usage error
            return int(usage.code or 0)

    code = must_hold(call, f"lakeops {' '.join(argv)}")
    err = capsys.readouterr().err
    assert code in (0, 1, 2), (argv, code, err)
    assert "Traceback" not in err, (argv, err)
    if code:
        assert "error" in err, (argv, err)


OPTIONS = {
    "inspect": {"--version": integers, "--snapshot-id": integers, "--timestamp": timestamps},
    "compact": {
        "--target-file-size": amounts,
        "--min-input-files": integers,
        "--where": predicates,
        "--commit-timeout": amounts,
        "--commit-retries": integers,
        "--dv-purge-ratio": _NUMBER,
    },
    "checkpoint": {"--version": integers, "--part-size": integers, "--target-manifest-size": amounts},
    "expire": {"--older-than": amounts, "--retain-last": integers, "--keep-from-version": integers},
    "orphans": {"--older-than": amounts, "--listing-threshold": integers, "--keep-from-version": integers},
    "purge-trash": {"--older-than": amounts},
}
DRY_RUN = {"compact", "checkpoint", "expire", "orphans", "purge-trash"}


@settings(FUZZ, max_examples=max(10, EXAMPLES // 4))
@given(data=st.data())
def test_hostile_option_values_end_in_a_message(
    data: st.DataObject, table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    command = data.draw(st.sampled_from(sorted(OPTIONS)))
    options = OPTIONS[command]
    chosen = data.draw(st.lists(st.sampled_from(sorted(options)), min_size=1, max_size=2, unique=True))
    argv = [command, table, *(f"{name}={data.draw(options[name])}" for name in chosen)]
    endpoint = data.draw(st.sampled_from(["none", "option", "AWS_ENDPOINT_URL"]))
    if endpoint == "option":
        argv.append(f"--endpoint-url={data.draw(endpoints)}")
    with pytest.MonkeyPatch.context() as env:
        if endpoint == "AWS_ENDPOINT_URL":  # read only for S3 locations: the table is one here
            env.setenv(endpoint, data.draw(env_endpoints))
            env.setattr(s3, "MAX_ATTEMPTS", 1)  # a refused connection fails at once
            env.setenv("AWS_ACCESS_KEY_ID", "fake")
            env.setenv("AWS_SECRET_ACCESS_KEY", "fake")
            argv[1] = "s3://lakeops-hostile/t"
        _run([*argv, "--dry-run"] if command in DRY_RUN else argv, capsys)
        s3.clear_client_cache()


@settings(FUZZ, max_examples=max(10, EXAMPLES // 4))
@given(data=st.data())
def test_hostile_catalog_uris_end_in_a_message(
    data: st.DataObject, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = str(tmp_path_factory.getbasetemp() / "catalogs")
    Path(folder).mkdir(exist_ok=True)
    command = data.draw(st.sampled_from(["inspect", "compact", "expire", "orphans", "checkpoint"]))
    argv = [command, "ns.t", f"--catalog-uri={data.draw(catalog_uris(folder))}"]
    _run([*argv, "--dry-run"] if command != "inspect" else argv, capsys)
