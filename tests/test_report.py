"""`paylens report` and `paylens demo` run for real (a subprocess, a kernel, the notebook) over
warehouses synced from sandboxes, and the HTML is read back against figures computed here
straight from the warehouse; plus the `Period` the notebook reads, in process."""

from __future__ import annotations

import base64
import contextlib
import functools
import html
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest import mock

import duckdb
import pandas as pd
import pytest

from paylens import Sandbox
from paylens.cli import main
from paylens.report import (
    Period,
    TieOutError,
    format_duration,
    format_minor,
    format_rate,
)
from paylens.warehouse import Warehouse, sync_file

SECRET = "sk_sandbox_report-test-secret-d41d8cd98f00b204"


#: A failure reason a service could add (the interface's enums are open), written as markup.
HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse file synced from a small sandbox whose secret the test knows, and one more
    failed payout whose failure reason is markup (shown in the report's exceptions)."""
    path = tmp_path_factory.mktemp("report") / "paylens.duckdb"
    sandbox = Sandbox(seed=3, transactions=2_000, client_secret=SECRET)
    sync_file(path, sandbox.client(), progress=False)
    with Warehouse(path) as wh:
        (raw,) = wh.sql(
            "SELECT raw FROM transactions WHERE type = 'OUTGOING' AND status = 'FAILED'"
            " ORDER BY id LIMIT 1"
        )["raw"]
        record = json.loads(raw)
        record.update(id=f"{record['id']}-hostile", failureReason=HOSTILE)
        record.pop("refund", None)
        wh.store_transactions([record])
    return path


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _paylens(
    *args: str, cwd: Path, tty: bool = False, **env: str
) -> subprocess.CompletedProcess[str]:
    """`paylens ARGS` run in this process from `cwd` (the notebook's kernel is still a process
    of its own), with `env` added to the environment and stderr a terminal if `tty`; its exit
    code and output."""
    out, err = io.StringIO(), _Terminal() if tty else io.StringIO()
    loggers = [logging.getLogger(name) for name in ("paylens", "paylens.client")]
    levels = [logger.level for logger in loggers]
    try:
        with (
            mock.patch.dict(os.environ, {"MPLBACKEND": "Agg", **env}),
            contextlib.chdir(cwd),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            code = main(list(args))
    finally:  # main sets the verbosity of paylens' loggers: leave them as they were
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def _text(page: str) -> str:
    """The visible text of an HTML page, whitespace collapsed."""
    body = re.sub(r"<(style|script)\b.*?</\1>", " ", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))


def _figures(page: str) -> list[str]:
    """The SVG documents of the figures an HTML report embeds, in page order."""
    found = re.findall(r'<img[^>]*src="data:image/svg\+xml;base64,([^"]+)"', page)
    return [base64.b64decode(data).decode("utf-8") for data in found]


def _expected_headline(path: Path) -> dict[str, str]:
    """Each currency's headline row, as the report must write it, from SQL over the file."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        rows = con.sql(
            """
            WITH incoming AS (
                SELECT currency, any_value(decimals) AS d, count(*) AS n, sum(amount_minor) AS v
                FROM transactions WHERE type = 'INCOMING' AND status = 'COMPLETED'
                AND settled_at IS NOT NULL GROUP BY 1),
            outgoing AS (
                SELECT sent_amount_currency AS currency, any_value(sent_amount_decimals) AS d,
                       count(*) AS n, sum(sent_amount_minor) AS v, sum(fees_minor) AS fees,
                       sum(platform_fees_minor) AS platform
                FROM outgoing_fees WHERE status = 'COMPLETED' AND settled_at IS NOT NULL
                GROUP BY 1),
            card AS (
                SELECT authorized_amount_currency AS currency, any_value(authorized_amount_decimals) AS d,
                       count(*) AS n,
                       sum(coalesce(settled_amount_minor, 0)) - sum(coalesce(refunded_amount_minor, 0)) AS v
                FROM card_transactions GROUP BY 1)
            SELECT currency, coalesce(i.d, o.d, c.d), i.n, i.v, o.n, o.v, o.fees, o.platform,
                   c.n, c.v
            FROM incoming i FULL JOIN outgoing o USING (currency) FULL JOIN card c USING (currency)
            """
        ).fetchall()
    finally:
        con.close()

    def count(n: int | None) -> str:
        return "–" if n is None else f"{n:,}"

    def money(v: int | None, d: int) -> str:
        return "–" if v is None else format_minor(v, d)

    return {
        cur: " ".join([cur, count(i_n), money(i_v, d), count(o_n), money(o_v, d), money(fees, d)])
        + f" {money(platform, d)} {count(c_n)} {money(c_v, d)}"
        for cur, d, i_n, i_v, o_n, o_v, fees, platform, c_n, c_v in rows
    }


def _expected_summary(path: Path) -> dict[str, str]:
    """Each currency's first summary figures, as the report must write them, from SQL over
    the file: completed transfers, amounts sent and received, fees charged."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        rows = con.sql(
            """
            WITH t AS (
                SELECT currency, any_value(decimals) AS d, count(*) AS n,
                       sum(amount_minor) FILTER (WHERE type = 'OUTGOING') AS sent,
                       sum(amount_minor) FILTER (WHERE type = 'INCOMING') AS received
                FROM transactions WHERE status = 'COMPLETED' AND type <> 'CARD'
                AND settled_at IS NOT NULL GROUP BY 1),
            f AS (
                SELECT sent_amount_currency AS currency, sum(fees_minor) AS fees
                FROM outgoing_fees WHERE status = 'COMPLETED' AND settled_at IS NOT NULL
                GROUP BY 1)
            SELECT currency, d, n, sent, received, fees FROM t LEFT JOIN f USING (currency)
            """
        ).fetchall()
    finally:
        con.close()

    def money(v: int | None, d: int) -> str:
        return "–" if v is None else format_minor(v, d)

    return {
        cur: f"{cur} {n:,} {money(sent, d)} {money(received, d)} {money(fees, d)}"
        for cur, d, n, sent, received, fees in rows
    }


def _expected_rates(path: Path, currency: str) -> str:
    """A currency's outgoing failure rate over resolved transfers and the Kaplan–Meier median
    settlement time (open transfers censored at the sync's time: the service's clock when
    it was read, or the newest instant of the transactions when later), from the file's rows."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        (failed,) = con.execute(
            """
            SELECT count(*) FILTER (WHERE status = 'REFUNDED' OR (status = 'FAILED'
                       AND coalesce(refund_reason, '') <> 'USER_CANCELLATION'))
                   / count(*) FILTER (WHERE status IN
                       ('COMPLETED', 'FAILED', 'EXPIRED', 'REJECTED', 'REFUNDED'))
            FROM transactions WHERE type = 'OUTGOING' AND currency = ?
            """,
            [currency],
        ).fetchone()
        times = con.execute(
            """
            WITH latest AS (SELECT epoch_us(greatest(
                                (SELECT max(read_at) FROM resource_reads),
                                max(created_at), max(updated_at), max(settled_at))) AS t
                            FROM transactions)
            SELECT CASE WHEN status = 'COMPLETED' THEN epoch_us(settled_at) ELSE latest.t END
                       - epoch_us(created_at), status = 'COMPLETED'
            FROM outgoing_fees, latest
            WHERE status IN ('COMPLETED', 'PENDING', 'PENDING_AUTHORIZATION', 'PROCESSING')
              AND sent_amount_currency = ?
            """,
            [currency],
        ).fetchall()
    finally:
        con.close()
    survival, median = 1.0, None
    for t in sorted({t for t, _ in times}):
        events = sum(1 for u, done in times if u == t and done)
        if events:
            survival *= 1 - events / sum(1 for u, _ in times if u >= t)
            if survival <= 0.5 + 1e-9:
                median = t / 1e6
                break
    return f"{format_rate(failed)} {format_duration(median)}"


def test_a_failed_tie_out_fails_the_report_loudly(warehouse: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.duckdb"
    broken.write_bytes(warehouse.read_bytes())
    con = duckdb.connect(str(broken))
    con.execute(
        "UPDATE outgoing_fees SET fees_minor = fees_minor + 1"
        " WHERE id = (SELECT min(id) FROM outgoing_fees)"
    )
    con.close()
    args = ["--db", str(broken), "--out", "reports", "--quiet"]
    done = _paylens("report", *args, cwd=tmp_path, tty=True)
    assert done.returncode == 1
    assert "TIE-OUT FAILED: 2 of 14 checks" in done.stderr
    assert "computing the figures" not in done.stderr  # --quiet: no progress, even in a tty
    text = _text((tmp_path / done.stdout.strip()).read_text(encoding="utf-8"))
    assert "TIE-OUT FAILED" in text
    assert (
        "fee components explain every fee (transactions with a residual): expected 0, got 1" in text
    )
    assert "paylens report" in text  # the prose is there; the figures after the checks are not
    assert "settlement p50" not in text and "✓" not in text


def test_demo_syncs_reports_and_prints_headline_figures(tmp_path: Path) -> None:
    """`paylens demo` syncs, reports and prints; the report it wrote (`render_report` over the
    default period, as `paylens report` runs it) holds the headline figures computed here from
    the file, every plot, and no secret: the sandbox's, set in the environment too, as a
    service's would be. (The report is run once here for both; `paylens report` itself is run
    by the tests below.)"""
    args = ["demo", "--transactions", "1500", "--db", "data/paylens.duckdb", "--out", "reports"]
    with mock.patch("paylens.sandbox.Sandbox", functools.partial(Sandbox, client_secret=SECRET)):
        done = _paylens(*args, cwd=tmp_path, tty=True, PAYLENS_CLIENT_SECRET=SECRET)
    assert done.returncode == 0, done.stderr
    # the quick start's main job is never silent in a terminal: the report's phases show
    assert re.search(r"computing the figures \(running the notebook\).* \d+/\d+", done.stderr)
    assert "report: rendering the HTML" in done.stderr
    assert "running the report notebook" not in done.stdout  # said so only when no bar shows
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("paylens ") and "SANDBOX DATA" in lines[0]
    # dated: each scheduled run keeps its own report
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    assert lines[-1].endswith(f"the report: reports/paylens-report_all_all_run-{day}.html")
    warehouse = tmp_path / "data/paylens.duckdb"
    headline = _expected_headline(warehouse)
    out = re.sub(r"\s+", " ", done.stdout)
    assert headline["USD"] in out  # the busiest currency's row, as the report writes it
    assert "sync #1 (full, SANDBOX DATA" in done.stdout
    page = tmp_path / f"reports/paylens-report_all_all_run-{day}.html"
    content = page.read_text(encoding="utf-8")
    executed = page.with_suffix(".ipynb").read_text(encoding="utf-8")
    text = _text(content)
    assert "SANDBOX DATA — simulated by paylens' sandbox, not the service" in text
    assert "checks: ✓ 14 of 14 passed" in text
    # the summary's row of each currency, the amounts with the currency's own decimals
    summary = _expected_summary(warehouse)
    assert len(summary) > 5
    for row in summary.values():
        assert row in text
    assert _expected_rates(warehouse, "USD") in text  # USD's failure rate and median, in its row
    # no number in scientific notation (an id's hex is no number)
    assert not re.search(r"(?<![\w-])\d+(\.\d+)?e[-+]\d+(?![\w-])", text)
    assert not re.search(r"\d{2}:\d{2}:\d{2}\.\d", text)  # instants to the second
    # every plot, embedded as a vector figure whose words are text, not drawn glyphs
    figures = _figures(content)
    titles = [
        "Who earns what on completed transfers, by settlement month",
        "Fees collected on completed transfers by settlement month",
        "Fees of outgoing transfers by corridor",
        "Settlement times of outgoing transfers by rail",
        "Unsuccessful outgoing transfers by rail",
        "Refunded transfers by refund reason",
        "Card transactions in USD by merchant",
    ]
    assert len(figures) == len(titles)
    for title, figure in zip(titles, figures, strict=True):
        texts = re.findall(r"<text\b[^>]*>([^<]*)</text>", figure)
        assert any(text.startswith(title) for text in texts), title
        assert any(text.startswith("SANDBOX DATA") for text in texts), title
    assert "FX margin rate" in text and "fx_margin" not in text  # the sandbox's own mid rates
    assert "<details>" in content and text.count("Sep 2025") >= 1
    assert "Period.open" not in text and "fee_breakdown(" not in text  # no code cells
    assert SECRET not in content and SECRET not in executed and SECRET not in done.stdout
    assert str(warehouse.resolve()) in executed  # the parameters papermill injected


def test_the_report_command_leaves_the_figures_to_the_kernel() -> None:
    """`paylens report` runs the notebook and writes its HTML: what computes and draws the
    figures (the analysis, pandas, matplotlib) loads in the notebook's kernel only, not a
    second time in the command's own process (~0.6 s of a report)."""
    code = (
        "import sys\n"
        "from paylens.cli import build_parser\n"
        "from paylens.report import ReportError, render_report\n"
        "from paylens.report._bounds import instant\n"
        "build_parser().parse_args(['report', '--start', '2025-09-01'])\n"
        "assert instant('2025-09-01T10:00:00+02:00').hour == 8\n"
        "print(' '.join(sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    assert "paylens.report._render" in loaded
    assert not {"pandas", "matplotlib", "paylens.analysis", "paylens.report._figures"} & loaded


def test_report_refuses_a_missing_database_and_an_empty_period(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "--db", str(tmp_path / "none.duckdb"), "--out", str(tmp_path)]) == 2
    assert "no warehouse at" in capsys.readouterr().err
    (tmp_path / "x.duckdb").touch()
    args = ["report", "--db", str(tmp_path / "x.duckdb"), "--start", "2025-09-02", "--end"]
    assert main([*args, "2025-09-01", "--out", str(tmp_path)]) == 2
    assert "the period is empty" in capsys.readouterr().err


@pytest.fixture(scope="module")
def opened(warehouse: Path) -> Iterator[Warehouse]:
    with Warehouse(warehouse, read_only=True) as wh:
        yield wh


def test_period_bounds_are_start_inclusive_end_exclusive_in_one_currency(
    opened: Warehouse,
) -> None:
    created = opened.sql(
        "SELECT created_at FROM transactions WHERE currency = 'USD' ORDER BY created_at"
    )["created_at"]
    start, end = created.iloc[100], created.iloc[400]
    period = Period(opened, start=start, end=end, currency="USD")
    assert len(period.transactions) == 300  # the row at `start` in, the row at `end` out
    assert set(period.transactions["currency"]) == {"USD"}
    assert set(period.fees["sent_amount_currency"]) == {"USD"}
    assert set(period.cards["authorized_amount_currency"]) <= {"USD"}
    assert list(period.headline().index) == ["USD"]
    assert Period.assert_tie_outs(period.tie_outs()) == "all 14 tie-out checks passed"
    header = repr(period.run_header())
    assert "currency: USD" in header and "(exclusive)" in header


def test_report_survives_an_empty_period(warehouse: Path, tmp_path: Path) -> None:
    args = ["--start", "2031-01-01", "--end", "2031-02-01"]
    empty = _paylens("report", "--db", str(warehouse), *args, cwd=tmp_path, tty=True)
    assert empty.returncode == 0, empty.stderr
    # in a terminal, each phase shows: the notebook's cells as they run, then the HTML
    assert re.search(r"computing the figures \(running the notebook\).* \d+/\d+", empty.stderr)
    assert "report: rendering the HTML" in empty.stderr
    text = _text((tmp_path / empty.stdout.strip().splitlines()[-1]).read_text(encoding="utf-8"))
    assert "checks: ✓ 14 of 14 passed" in text and "nothing to show" not in text
    assert "No transactions in this period." in text
    assert "2031-01-01 00:00:00 UTC to 2031-01-31 23:59:59 UTC" in text


def test_tie_outs_name_every_check_that_failed(opened: Warehouse) -> None:
    period = Period(opened)
    period.cards = period.cards.iloc[1:]
    checks = period.tie_outs()
    assert not checks.loc["the card transactions table holds every card transaction", "passed"]
    with pytest.raises(
        TieOutError, match=r"the card transactions table holds every card transaction"
    ):
        Period.assert_tie_outs(checks)


def test_exceptions_list_each_kind(opened: Warehouse) -> None:
    period = Period(opened)
    exceptions = period.exceptions()
    failed = opened.sql(
        "SELECT count(*) AS n FROM transactions WHERE status = 'FAILED' AND type <> 'CARD'"
    )["n"].iloc[0]
    kinds = exceptions["kind"].value_counts()
    assert kinds["failed transaction"] == failed
    assert kinds["card transaction in EXCEPTION"] == (period.cards["status"] == "EXCEPTION").sum()
    assert {"settled later than expected", "stale card hold"} <= set(kinds.index)
    assert exceptions["amount"].str.match(r"^-?[\d,]+(\.\d+)? [A-Z]+$").all()


def test_each_exception_is_listed_once_under_its_right_heading(opened: Warehouse) -> None:
    """Every kind the sandbox's data holds is counted exactly against SQL over the file: a
    transfer still PENDING or PROCESSING past its expected settlement is open past it, never
    also "settled later than expected" (which only a completed transfer can be)."""
    period = Period(opened)
    exceptions = period.exceptions()
    kinds = exceptions["kind"].value_counts().to_dict()
    # the latest instant of the outgoing transfers' data: what `as_of` defaults to
    (latest,) = opened.sql(
        "SELECT greatest(max(created_at), max(updated_at)) AS t FROM transactions"
        " WHERE type = 'OUTGOING'"
    )["t"]
    expected = opened.sql(
        """
        SELECT count(*) FILTER (WHERE status = 'COMPLETED' AND settled_at > expected_settlement_at)
                   AS late,
               count(*) FILTER (WHERE status IN ('PENDING', 'PROCESSING', 'PENDING_AUTHORIZATION')
                   AND expected_settlement_at < ?) AS overdue
        FROM outgoing_fees
        """,
        [latest],
    ).iloc[0]
    assert expected["late"] > 0 and expected["overdue"] > 0  # the data holds both kinds
    assert kinds["settled later than expected"] == expected["late"]
    assert kinds["open past its expected settlement"] == expected["overdue"]
    late = exceptions[exceptions["kind"] == "settled later than expected"]
    assert set(late["status"]) == {"COMPLETED"}
    assert not late["detail"].str.startswith("–").any()
    # no transaction under two headings of one kind of trouble
    settlement = exceptions[exceptions["kind"].str.contains("expected")]
    assert settlement["id"].is_unique


def test_formats() -> None:
    assert format_minor(123456, 2) == "1,234.56"
    assert format_minor(-5, 2) == "-0.05"
    assert format_minor(1500, 0) == "1,500"
    assert format_minor(3213295, 8) == "0.03213295"
    assert format_rate(0.061292) == "6.13%"
    assert format_rate(float("nan")) == "–"
    assert format_duration(5742.9) == "1.6 h"
    assert format_duration(42) == "42 s"
    assert format_duration(3 * 86_400) == "3.0 days"
    assert format_duration(float("nan")) == "–"


def test_show_writes_fractions_as_percentages_and_missing_as_one_dash() -> None:
    import pandas as pd

    from paylens.report import show

    frame = pd.DataFrame(
        {
            "rail": pd.array(["ACH", None], dtype="string[pyarrow]"),
            "take_rate": pd.array([0.012345, None], dtype="double[pyarrow]"),
            "coarse_payout_share": [0.5, 0.25],
            "exchange_rate": [18.512345, 0.0012345],
            "fees_minor": pd.array([1234567, None], dtype="int64[pyarrow]"),
        }
    )
    page = _text(show(frame).to_html())
    assert "ACH 1.23% 50.00% 18.51 1,234,567" in page
    assert "– – 25.00% 0.0012345 –" in page


def test_show_writes_checks_as_marks_small_amounts_plainly_and_instants_to_the_second() -> None:
    import pandas as pd

    from paylens.report import show

    frame = pd.DataFrame(
        {
            "passed": [True, False],
            "fees_major": [7.835e-05, 1234.5],
            "created_at": pd.to_datetime(
                ["2025-10-13 14:02:11.123456+00:00", "2025-10-13 16:02:11+02:00"],
                format="ISO8601",
                utc=True,
            ),
        }
    )
    page = _text(show(frame).to_html())
    assert "passed fees created at" in page  # headers in words
    assert "✓ 0.00007835 2025-10-13 14:02:11 UTC" in page
    assert "✗ 1,234.50 2025-10-13 14:02:11 UTC" in page


def test_show_writes_the_services_text_as_text_never_markup() -> None:
    import pandas as pd

    from paylens.report import show

    frame = pd.DataFrame({"detail": [HOSTILE], "failure_rate": [0.5]})
    page = show(frame).to_html()
    assert HOSTILE not in page and html.escape(HOSTILE) in page


def test_reference_rates_come_from_the_operators_file(warehouse: Path, tmp_path: Path) -> None:
    from paylens.errors import InvalidArgumentError
    from paylens.report import Period

    rates = tmp_path / "mid.csv"
    rates.write_text(
        "date,sent_currency,received_currency,mid_rate\n"
        "2025-09-01,USD,MXN,18.5\n2025-09-02,USD,MXN,18.6\n"
    )
    period = Period.open(warehouse, reference_rates=rates)
    series = period.reference_rates
    assert series is not None
    assert series["mid_rate"].tolist() == [18.5, 18.6]
    assert series.attrs["source"] == "reference mid rates from mid.csv"
    broken = tmp_path / "broken.csv"
    broken.write_text("date,pair,rate\n2025-09-01,USD/MXN,18.5\n")
    with pytest.raises(InvalidArgumentError, match="sent_currency, received_currency, mid_rate"):
        _ = Period.open(warehouse, reference_rates=broken).reference_rates
    # in a lower-case currency too: the report names it in capitals
    args = ["--db", str(warehouse), "--out", "r", "--currency", "usd"]
    # the environment holds the secret of the sandbox the file was synced from
    done = _paylens(
        "report", *args, "--reference-rates", str(rates), cwd=tmp_path, PAYLENS_CLIENT_SECRET=SECRET
    )
    assert done.returncode == 0, done.stderr
    name = f"paylens-report_all_all_USD_run-{datetime.now(UTC):%Y-%m-%d}"
    assert done.stdout.strip() == f"r/{name}.html"
    executed = (tmp_path / "r" / f"{name}.ipynb").read_text(encoding="utf-8")
    assert str(rates.resolve()) in executed  # passed to the notebook as a parameter
    assert str(warehouse) in executed
    content = (tmp_path / "r" / f"{name}.html").read_text()
    assert SECRET not in content and SECRET not in executed
    # the failure reason the service wrote as markup is in the exceptions, as text
    assert HOSTILE not in content and html.escape(HOSTILE) in content
    text = _text(content)
    assert "currency USD" in text and "checks: ✓ 14 of 14 passed" in text
    assert "partial" in text


def test_the_headline_sums_every_group_of_a_currency_and_never_guesses_decimals(
    tmp_path: Path,
) -> None:
    """A USD card transaction paid from an EUR account is in USD's headline with the others
    (the card summary groups them apart by the paying account's currency); a record whose
    currency object leaves out `decimals` (the interface makes none of its fields required)
    is counted, in the decimals other records give for that code."""
    import json
    import uuid

    from paylens.report import Period

    path = tmp_path / "w.duckdb"
    sync_file(path, Sandbox(seed=1, transactions=1_000).client(), progress=False)
    with Warehouse(path) as wh:
        eur = wh.sql("SELECT id FROM internal_accounts WHERE balance_currency = 'EUR' LIMIT 1")
        card, incoming = (
            json.loads(
                wh.sql(f"SELECT raw FROM transactions WHERE {where} ORDER BY id LIMIT 1")["raw"][0]
            )
            for where in (
                "type = 'CARD' AND status = 'SETTLED' AND currency = 'USD'",
                "type = 'INCOMING' AND status = 'COMPLETED' AND currency = 'USD'",
            )
        )
        card.update(id=f"CardTransaction:{uuid.uuid4()}", accountId=eur["id"][0])
        incoming["id"] = f"Transaction:{uuid.uuid4()}"
        del incoming["receivedAmount"]["currency"]["decimals"]
        wh.store_transactions([card, incoming])
        headline = Period(wh).headline()
    usd = " ".join(["USD", *headline.loc["USD"].astype(str)])
    assert usd == _expected_headline(path)["USD"]


def test_the_report_kernel_gets_no_service_setting_and_no_secret_shows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from paylens.client._signing import SessionKey
    from paylens.report import _render

    key = SessionKey.generate().export_private_hex()
    monkeypatch.setenv("PAYLENS_CLIENT_SECRET", SECRET)
    monkeypatch.setenv("PAYLENS_SESSION_KEY", key)
    monkeypatch.setenv("PAYLENS_BASE_URL", "https://service.example/2025-10-13")
    kernel = _render._kernel_environment()
    assert not [name for name in kernel if name.startswith("PAYLENS_")]
    assert kernel.get("PATH") == os.environ.get("PATH")
    assert _render._secrets_in("a cell printed " + key) == ["PAYLENS_SESSION_KEY"]
    assert _render._secrets_in("from https://service.example/2025-10-13") == []


def test_two_periods_of_one_day_write_two_reports() -> None:
    from datetime import UTC, datetime

    from paylens.report._render import report_name

    day, noon, night = (
        datetime(2025, 9, 1, tzinfo=UTC),
        datetime(2025, 9, 1, 12, tzinfo=UTC),
        datetime(2025, 9, 2, tzinfo=UTC),
    )
    morning, afternoon = report_name([day, noon], "USD"), report_name([noon, night], "USD")
    assert morning != afternoon
    assert report_name([day, night], None) == "paylens-report_2025-09-01_2025-09-02"
    assert report_name([None, None], "EUR") == "paylens-report_all_all_EUR"


def test_out_is_a_folder_or_a_dated_file_name_template() -> None:
    from paylens.errors import InvalidArgumentError
    from paylens.report._render import report_path

    now = datetime(2025, 10, 13, 14, 2, 11, tzinfo=UTC)
    september = [datetime(2025, 9, 1, tzinfo=UTC), datetime(2025, 10, 1, tzinfo=UTC)]
    assert report_path("reports", september, "USD", now) == Path(
        "reports/paylens-report_2025-09-01_2025-10-01_USD_run-2025-10-13.html"
    )
    assert report_path("r/paylens-{date}.html", [None, None], None, now) == Path(
        "r/paylens-2025-10-13.html"
    )
    assert report_path("r/{period}-{date}T{time}.html", september, None, now) == Path(
        "r/2025-09-01_2025-10-01-2025-10-13T140211.html"
    )
    with pytest.raises(InvalidArgumentError, match=r"\{date\}, \{time\}, \{period\}"):
        report_path("r/paylens-{day}.html", september, None, now)
    with pytest.raises(InvalidArgumentError, match=r"ends in \.html"):
        report_path("r/paylens-{date}", september, None, now)


def test_a_failed_scheduled_sync_fails_the_reports_tie_out(tmp_path: Path) -> None:
    """A `paylens sync` that fails leaves its run in the staged copy it will resume, not in
    the file: the report still sees it (`last_sync`), so its "last sync succeeded" check
    fails instead of passing on the sync before."""
    from paylens.errors import PaylensError
    from paylens.report import Period, TieOutError

    sandbox = Sandbox(seed=3, transactions=500)
    path = tmp_path / "w.duckdb"
    sync_file(path, sandbox.client(), progress=False)
    sandbox.faults.inject(429, "RATE_LIMITED", count=10_000, retry_after=0)
    with pytest.raises(PaylensError):
        sync_file(path, sandbox.client(max_retries=0), progress=False)
    with Warehouse(path, read_only=True) as wh:
        last = wh.last_sync()
        assert last is not None and (last["run_id"], last["status"]) == (2, "failed")
        assert list(wh.sync_runs()["status"]) == ["succeeded"]  # the file holds the first
        period = Period(wh)
        checks = period.tie_outs()
        assert checks.loc["last sync succeeded", "actual"] == "failed"
        with pytest.raises(TieOutError, match="last sync succeeded"):
            Period.assert_tie_outs(checks)
    sandbox.faults.clear()
    sync_file(path, sandbox.client(), progress=False)  # the next one resumes and succeeds
    with Warehouse(path, read_only=True) as wh:
        assert wh.last_sync()["status"] == "succeeded"  # type: ignore[index]


#: A headless Chromium, where the machine has one (`.ci/run` installs Debian's when it can).
CHROMIUM = next(
    (found for name in ("chromium", "chromium-browser") if (found := shutil.which(name))), None
)

#: Run in the page once loaded: where the summary ends on the first screen, then with every
#: section unfolded, how wide the page is and which tables or figures reach past the window.
_PROBE = """<script>
window.addEventListener("load", () => {
  const summary = document.getElementById("summary").getBoundingClientRect();
  document.querySelectorAll("details").forEach((d) => { d.open = true; });
  const width = document.documentElement.clientWidth;
  const wide = [...document.querySelectorAll("table, img")]
    .filter((e) => e.getBoundingClientRect().right > width + 0.5).length;
  document.body.setAttribute("data-probe", JSON.stringify({
    summaryBottom: summary.bottom, width: width, scrollWidth: document.documentElement.scrollWidth,
    wide: wide, tables: document.querySelectorAll("table").length,
    images: document.querySelectorAll("img").length,
  }));
});
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here (.ci/run installs Debian's)")
def test_the_report_reads_at_1400_px_in_a_real_browser(warehouse: Path, tmp_path: Path) -> None:
    """The report in a real browser 1,400 px wide and 900 tall: the summary ends on the first
    screen, and with every section unfolded no table or figure runs past the window."""
    from paylens.report import render_report

    page = render_report(warehouse, out=tmp_path / "paylens-{date}.html")
    assert page.name == f"paylens-{datetime.now(UTC):%Y-%m-%d}.html"
    probe = tmp_path / "probe.html"
    probe.write_text(
        page.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"), encoding="utf-8"
    )
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1400,900",
            "--virtual-time-budget=10000",
            "--dump-dom",
            probe.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = re.search(r'data-probe="([^"]*)"', done.stdout)
    assert found, done.stderr[-2000:]
    measured = json.loads(html.unescape(found.group(1)))
    assert measured["width"] == 1400
    assert measured["summaryBottom"] <= 900  # the summary on the first screen
    assert measured["scrollWidth"] <= measured["width"]  # no horizontal scrolling
    assert measured["wide"] == 0  # no table or figure past the window
    assert measured["tables"] >= 11 and measured["images"] == 7


def test_the_balance_rollforward_ties_out_to_the_reads_and_its_movements(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report's roll-forward rows tie to the balances read and the movements listed; a
    helper whose closing were not the balance read at the month's end fails the check."""
    from paylens.report import _balances

    check = "balance roll-forward rows not tying to the balances read and the movements listed"
    sandbox = Sandbox(seed=3, transactions=800)
    with Warehouse(tmp_path / "w.duckdb") as wh:  # two reads of the balances, 20 days apart
        wh.sync(sandbox.client(), progress=False)
        sandbox.advance(timedelta(days=20))
        wh.sync(sandbox.client(), progress=False)
        period = Period(wh)
        rows = _balances.rollforward(period)
        assert len(rows) > 0 and rows["movement_count"].sum() > 0
        assert period.tie_outs().loc[check, "actual"] == 0
        heading, table = _balances.rollforward_table(rows)
        assert heading.startswith(f"{len(rows):,} account-months")
        assert list(table.columns)[-1] == "break" and "balances read at" in heading
        real = _balances.balance_rollforward

        def off_by_one(data: Warehouse, **kw: object) -> pd.DataFrame:
            frame = real(data, **kw).copy()  # type: ignore[arg-type]
            if "closing_balance_minor" in frame:
                frame.loc[frame.index[0], "closing_balance_minor"] += 1
            return frame

        monkeypatch.setattr(_balances, "balance_rollforward", off_by_one)
        assert period.tie_outs().loc[check, "actual"] == 1
