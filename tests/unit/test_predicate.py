"""``--where`` partition predicates: parsing, typed evaluation and the errors users see."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from lakeops.errors import InvalidArgument
from lakeops.predicate import Condition, parse_predicate


def matches(text: str, **values: Any) -> bool:
    return parse_predicate(text).matches(values)


# --- parsing --------------------------------------------------------------------------------------


def test_parses_conjunction_into_typed_conditions() -> None:
    predicate = parse_predicate("year >= 2023 AND region IN ('eu', 'us') AND flag = true AND p IS NOT NULL")
    assert predicate.conditions == (
        Condition("year", ">=", (2023,)),
        Condition("region", "in", ("eu", "us")),
        Condition("flag", "=", (True,)),
        Condition("p", "is not null", ()),
    )
    assert predicate.columns == {"year", "region", "flag", "p"}
    assert predicate.text == "year >= 2023 AND region IN ('eu', 'us') AND flag = true AND p IS NOT NULL"


def test_literal_types() -> None:
    values = [c.values[0] for c in parse_predicate("a = 7 AND b = -3 AND c = 2.5 AND d = 'x' AND e = FALSE").conditions]
    assert values == [7, -3, 2.5, "x", False]
    assert [type(v) for v in values] == [int, int, float, str, bool]


def test_quotes_are_escaped_by_doubling() -> None:
    (condition,) = parse_predicate("name = 'O''Brien'").conditions
    assert condition.values == ("O'Brien",)
    assert parse_predicate("name IN ('it''s', '''', '')").conditions[0].values == ("it's", "'", "")
    assert matches("name = 'O''Brien'", name="O'Brien")
    assert not matches("name = 'O''Brien'", name="O''Brien")


def test_keywords_inside_strings_are_just_text() -> None:
    predicate = parse_predicate("note = 'a OR b AND c' AND x = 1")
    assert predicate.conditions[0].values == ("a OR b AND c",)
    assert len(predicate.conditions) == 2


def test_keywords_and_columns_are_case_insensitive_and_backticks_quote_names() -> None:
    assert matches("Region in ('EU') and YEAR is not null", region="EU", year=2024)
    predicate = parse_predicate("`event date` = '2024-01-01'")
    assert predicate.columns == {"event date"}
    assert predicate.matches({"event date": dt.date(2024, 1, 1)})


# --- evaluation -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("x = 5", 5, True),
        ("x == 5", 5, True),
        ("x != 5", 5, False),
        ("x <> 5", 4, True),
        ("x < 5", 4, True),
        ("x <= 5", 5, True),
        ("x > 5", 5, False),
        ("x >= 5", 5, True),
        ("x = '5'", 5, True),  # a quoted literal is coerced to the column's type
        ("x = 5", "5", True),  # and a number to a string column's text
        ("x = 5", "05", False),
    ],
)
def test_comparison_operators(text: str, value: Any, expected: bool) -> None:
    assert matches(text, x=value) is expected


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("x = 2.5", 2, False),  # not int(2.5) == 2: a filter must never widen
        ("x < 2.5", 2, True),
        ("x > 1.5", 2, True),
        ("x >= 2.0", 2, True),
        ("x = 2", 2.0, True),
        ("x < 3", 2.5, True),
    ],
)
def test_numeric_literals_compare_by_value(text: str, value: Any, expected: bool) -> None:
    assert matches(text, x=value) is expected


def test_decimal_partition_values() -> None:
    assert matches("price = 1.1", price=Decimal("1.10"))
    assert matches("price > 1.05", price=Decimal("1.10"))
    assert matches("price = 3", price=Decimal("3.00"))
    assert not matches("price < 1.1", price=Decimal("1.10"))


def test_dates() -> None:
    assert matches("d = '2024-02-29'", d=dt.date(2024, 2, 29))
    assert matches("d >= '2024-01-01' AND d < '2024-02-01'", d=dt.date(2024, 1, 31))
    assert not matches("d >= '2024-01-01' AND d < '2024-02-01'", d=dt.date(2024, 2, 1))
    assert matches("d IN ('2024-01-01', '2024-01-03')", d=dt.date(2024, 1, 3))
    with pytest.raises(InvalidArgument, match=r"cannot compare datetime\.date\(2024, 1, 1\) with '2024-13-01'"):
        matches("d = '2024-13-01'", d=dt.date(2024, 1, 1))


def test_timestamps_with_and_without_time_zone() -> None:
    utc = dt.datetime(2024, 1, 1, 12, 0, tzinfo=dt.UTC)
    # A zone-less literal against a `timestamp` (UTC) partition means UTC, as zone-less values do.
    assert matches("ts = '2024-01-01 12:00:00'", ts=utc)
    assert matches("ts < '2024-01-01T12:00:01'", ts=utc)
    assert matches("ts = '2024-01-01T13:00:00+01:00'", ts=utc)
    ntz = dt.datetime(2024, 1, 1, 12, 0)
    assert matches("ts = '2024-01-01 12:00:00'", ts=ntz)
    with pytest.raises(InvalidArgument, match="without time zone"):
        matches("ts = '2024-01-01T12:00:00Z'", ts=ntz)


def test_booleans() -> None:
    assert matches("flag = true", flag=True)
    assert matches("flag = TRUE", flag=True)
    assert matches("flag = 'false'", flag=False)
    assert not matches("flag = false", flag=True)
    assert matches("flag != true", flag=False)
    for literal in ("1", "'yes'", "'ture'"):  # not silently "false": that would select every false partition
        with pytest.raises(InvalidArgument, match="cannot compare False"):
            matches(f"flag = {literal}", flag=False)


def test_nulls() -> None:
    assert matches("p IS NULL", p=None)
    assert not matches("p IS NULL", p="a")
    assert matches("p IS NOT NULL", p="a")
    assert not matches("p IS NOT NULL", p=None)
    # SQL: any comparison with NULL is not true, negated ones included.
    assert not matches("p = 'a'", p=None)
    assert not matches("p != 'a'", p=None)
    assert not matches("p IN ('a', 'b')", p=None)
    assert not matches("p = 'a'")  # a column the file has no value for is NULL


def test_in_lists() -> None:
    assert matches("region IN ('eu', 'us')", region="us")
    assert not matches("region IN ('eu', 'us')", region="ap")
    assert matches("year IN (2023, 2024)", year=2024)
    assert matches("year IN ('2023')", year=2023)


def test_all_conditions_must_hold() -> None:
    assert matches("a = 1 AND b = 'x'", a=1, b="x")
    assert not matches("a = 1 AND b = 'x'", a=1, b="y")


def test_uncomparable_values_are_an_error_not_a_mismatch() -> None:
    with pytest.raises(InvalidArgument, match=r"cannot compare 2023 with 'abc'"):
        matches("year = 'abc'", year=2023)


# --- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a = 1 OR b = 2", "OR is not supported"),
        ("a = 1 or b = 2", "OR is not supported"),
        ("a =! 1", "cannot parse at '! 1'"),
        ("a => 1", "expected a literal, found '>'"),
        ("a LIKE 'x%'", "expected an operator after a, found 'LIKE'"),
        ("a ~ 1", "cannot parse at ' ~ 1'"),
        ("a = NULL", "expected a literal, found 'NULL'"),
        ("a = 1 b = 2", "expected AND, found 'b'"),
        ("a IS 5", "expected NULL after IS"),
        ("a IN 'x'", "expected '(' after IN"),
        ("a IN ('x' 'y')", "expected punct, found \"'y'\""),
        ("a IN ('x'; 'y')", "cannot parse at"),
    ],
)
def test_bad_syntax_is_rejected_clearly(text: str, message: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_predicate(text)
    assert message in str(info.value)
    assert repr(text) in str(info.value)  # the whole --where text is quoted back


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name = 'abc", 'cannot parse at " \'abc"'),
        ("name = 'it''s", "cannot parse at"),
        ("a IN ('x', 'y'", "expected punct, found 'end of input'"),
        ("a IN ('x',", "unterminated IN list"),
        ("a IN (", "unterminated IN list"),
        ("a =", "missing value after ="),
        ("a", "condition on a is incomplete"),
        ("a = 1 AND", "expected ident, found 'end of input'"),
        ("", "expected ident, found 'end of input'"),
        ("   ", "expected ident, found 'end of input'"),
    ],
)
def test_unterminated_input_is_rejected_clearly(text: str, message: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_predicate(text)
    assert message in str(info.value)


def test_require_columns_names_a_non_partition_column() -> None:
    predicate = parse_predicate("id = 5 AND year = 2023 AND amount > 1")
    with pytest.raises(InvalidArgument) as info:
        predicate.require_columns(["year", "region"], "s3://b/t")
    message = str(info.value)
    assert message.startswith("s3://b/t: --where may only use partition columns (year, region)")
    assert "amount, id is not one" in message


def test_require_columns_accepts_partition_columns_in_any_case() -> None:
    parse_predicate("YEAR = 2023 AND Region = 'eu'").require_columns(["year", "region"], "t")


def test_require_columns_on_an_unpartitioned_table() -> None:
    with pytest.raises(InvalidArgument, match=r"\(none: the table is not partitioned\); year is not one"):
        parse_predicate("year = 2023").require_columns([], "/data/t")
