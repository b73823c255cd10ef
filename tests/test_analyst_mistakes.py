"""Natural analyst mistakes (wrong case, a misspelling, a date spelled another way, a warehouse
never synced, a mistyped path), each over the warehouse's readers, the analysis helpers and the
command line: a value the interface spells in upper case is taken in any case; anything else is
refused in one line naming the fix; never an empty frame that reads as "nothing matched"."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from paylens import Sandbox, Warehouse
from paylens.analysis import (
    card_summary,
    failure_breakdown,
    fee_breakdown,
    fees_collected,
    refund_summary,
    settlement_times,
)
from paylens.errors import (
    InvalidArgumentError,
    WarehouseEmptyError,
    WarehouseNotFoundError,
)
from paylens.warehouse import sync_file

from ._helpers import run_cli

DATE_FORMS = (
    "give 'YYYY-MM-DD' (e.g. '2025-09-01', a whole UTC day), a date-time with its zone"
    " ('2025-09-01T00:00:00Z'), a datetime.date or an aware datetime"
)


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mistakes") / "paylens.duckdb"
    sync_file(path, Sandbox(seed=5, transactions=1_200).client(), progress=False)
    return path


@pytest.fixture(scope="module")
def wh(synced: Path) -> Iterator[Warehouse]:
    with Warehouse(synced, read_only=True) as warehouse:
        yield warehouse


@pytest.fixture
def never_synced(tmp_path: Path) -> Iterator[Warehouse]:
    with Warehouse(tmp_path / "new.duckdb") as warehouse:
        yield warehouse


# -- taken in any case: the same rows as the interface's spelling, and some ------------------


@pytest.mark.parametrize(
    ("asked", "spelled"),
    [
        ({"currency": "usd"}, {"currency": "USD"}),
        ({"status": "failed"}, {"status": "FAILED"}),
        ({"type": "outgoing"}, {"type": "OUTGOING"}),
        ({"payment_rail": "ach"}, {"payment_rail": "ACH"}),
        ({"status": ["pending", "Processing"]}, {"status": ["PENDING", "PROCESSING"]}),
        ({"currency": " Usd "}, {"currency": "USD"}),
    ],
)
def test_a_reader_takes_a_value_in_any_case(
    wh: Warehouse, asked: dict[str, Any], spelled: dict[str, Any]
) -> None:
    rows = wh.transactions(**asked)
    assert len(rows) > 0 and list(rows["id"]) == list(wh.transactions(**spelled)["id"])


def test_a_helper_takes_a_value_and_a_column_in_any_case(wh: Warehouse) -> None:
    assert fee_breakdown(wh, status="completed").equals(fee_breakdown(wh, status="COMPLETED"))
    assert len(failure_breakdown(wh, by="Rail", type="outgoing")) > 0
    assert failure_breakdown(wh, by="Rail").equals(failure_breakdown(wh, by="rail"))


# -- refused in one line naming the fix --------------------------------------------------------

Call = Callable[[Warehouse], object]

MISTAKES: list[tuple[str, Call, str, str]] = [
    # readers: a misspelt enum value
    (
        "status PENDNG",
        lambda w: w.transactions(status="PENDNG"),
        "status",
        "did you mean 'PENDING'",
    ),
    ("type outgoin", lambda w: w.transactions(type="outgoin"), "type", "did you mean 'OUTGOING'"),
    (
        "rail with a space",
        lambda w: w.transactions(payment_rail="sepa instant"),
        "payment_rail",
        "did you mean 'SEPA_INSTANT'",
    ),
    (
        "one of a list",
        lambda w: w.transactions(status=["PENDING", "procesing"]),
        "status",
        "did you mean 'PROCESSING'",
    ),
    ("fees status", lambda w: w.fees(status="COMPLETD"), "status", "did you mean 'COMPLETED'"),
    (
        "fees: not an outgoing status",
        lambda w: w.fees(status="SETTLED"),
        "status",
        "give one of COMPLETED, EXPIRED, FAILED, PENDING, PENDING_AUTHORIZATION, PROCESSING",
    ),
    (
        "card status",
        lambda w: w.card_transactions(status="setled"),
        "status",
        "did you mean 'SETTLED'",
    ),
    ("fees rail", lambda w: w.fees(payment_rail="fednwo"), "payment_rail", "'FEDNOW'"),
    # currencies: those the warehouse holds
    ("currency usdd", lambda w: w.transactions(currency="usdd"), "currency", "'USD'"),
    (
        "a currency the warehouse does not hold",
        lambda w: w.transactions(currency="XAU"),
        "currency",
        "give the currencies this warehouse holds: ",
    ),
    # dates
    ("date with slashes", lambda w: w.transactions(start="2025/09/01"), "start", DATE_FORMS),
    ("day first", lambda w: w.transactions(end="01-09-2025"), "end", DATE_FORMS),
    ("month in words", lambda w: w.transactions(start="Sept 2025"), "start", DATE_FORMS),
    ("naive datetime", lambda w: w.fees(start=datetime(2025, 9, 1)), "start", DATE_FORMS),
    (
        "naive ISO text",
        lambda w: w.card_transactions(end="2025-09-01T00:00:00"),
        "end",
        "has no time zone",
    ),
    # helpers: values and columns
    (
        "fee status",
        lambda w: fee_breakdown(w, status="complete"),
        "status",
        "did you mean 'COMPLETED'",
    ),
    (
        "revenue status",
        lambda w: fees_collected(w, status="COMPLETD"),
        "status",
        "did you mean 'COMPLETED'",
    ),
    ("failure by", lambda w: failure_breakdown(w, by="rial"), "by", "did you mean 'rail'"),
    (
        "failure type",
        lambda w: failure_breakdown(w, type="outgoin"),
        "type",
        "did you mean 'OUTGOING'",
    ),
    (
        "settlement by",
        lambda w: settlement_times(w, by="source type"),
        "by",
        "did you mean 'source_type'",
    ),
    ("settlement as_of", lambda w: settlement_times(w, as_of="Sept 2025"), "as_of", DATE_FORMS),
    (
        "settlement naive as_of",
        lambda w: settlement_times(w, as_of=datetime(2025, 9, 1)),
        "as_of",
        DATE_FORMS,
    ),
    ("card status", lambda w: card_summary(w, status="setled"), "status", "'SETTLED'"),
    ("refund by", lambda w: refund_summary(w, by="mnth"), "by", "did you mean 'month'"),
    ("refund type", lambda w: refund_summary(w, type="incomng"), "type", "'INCOMING'"),
]


@pytest.mark.parametrize(
    ("call", "argument", "fix"), [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES]
)
def test_a_mistake_is_refused_in_one_line_naming_the_fix(
    wh: Warehouse, call: Call, argument: str, fix: str
) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        call(wh)
    message = str(caught.value)
    assert caught.value.argument == argument
    assert message.startswith(f"{argument}: ") and "\n" not in message
    assert fix in message


def test_a_currency_refusal_names_exactly_the_currencies_held(wh: Warehouse) -> None:
    held = sorted(wh.sql("SELECT DISTINCT currency FROM transactions")["currency"].dropna())
    with pytest.raises(InvalidArgumentError) as caught:
        wh.transactions(currency="XAU")
    assert str(caught.value).endswith(f"holds: {', '.join(held)}")


# -- a warehouse never synced, a mistyped path -------------------------------------------------

NEVER_SYNCED: list[tuple[str, Call]] = [
    ("transactions", lambda w: w.transactions()),
    ("fees", lambda w: w.fees(status="COMPLETED")),
    ("cards", lambda w: w.cards()),
    ("fee_breakdown", lambda w: fee_breakdown(w)),
    ("settlement_times", lambda w: settlement_times(w, by="rail")),
    ("card_summary", lambda w: card_summary(w)),
]


@pytest.mark.parametrize("call", [c for _, c in NEVER_SYNCED], ids=[n for n, _ in NEVER_SYNCED])
def test_a_warehouse_never_synced_says_so_instead_of_an_empty_frame(
    never_synced: Warehouse, call: Call
) -> None:
    with pytest.raises(WarehouseEmptyError) as caught:
        call(never_synced)
    path = never_synced.path
    assert str(caught.value) == f"{path} has no data: run `paylens sync --db {path}` first"


def test_a_mistyped_path_is_not_found_and_never_made_for_a_reader(tmp_path: Path) -> None:
    typo = tmp_path / "dta" / "paylens.duckdb"
    with pytest.raises(WarehouseNotFoundError) as caught:
        Warehouse(typo, read_only=True)
    assert str(caught.value) == f"no warehouse at {typo}: run `paylens sync --db {typo}` first"
    assert list(tmp_path.iterdir()) == []


# -- the command line --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fix"),
    [
        (
            ["report", "--db", "{tmp}/typo.duckdb"],
            "no warehouse at {tmp}/typo.duckdb: run `paylens",
        ),
        (["report", "--db", "{db}", "--currency", "XAU"], "(its currencies: "),
        (["report", "--db", "{db}", "--start", "2025/09/01"], "is not a date (YYYY-MM-DD)"),
        (["sync", "--sandbox", "--db", "{tmp}/dta/p.duckdb"], "the folder '{tmp}/dta' does not"),
        (["cancel", "--db", "{db}", "--where", "status = 'pending'", "--dry-run"], "'PENDING'"),
        (
            [
                "cancel",
                "--db",
                "{db}",
                "--where",
                "payment_rail='ACH' AND status='PENDNG'",
                "--dry-run",
            ],
            "did you mean 'PENDING'",
        ),
    ],
)
def test_a_mistake_on_the_command_line_is_one_line_and_exit_2(
    synced: Path, tmp_path: Path, args: list[str], fix: str
) -> None:
    fill = {"tmp": str(tmp_path), "db": str(synced)}
    done = run_cli(*(a.format(**fill) for a in args))
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1 and fix.format(**fill) in done.stderr
    assert not (tmp_path / "typo.duckdb").exists() and not (tmp_path / "dta").exists()
