"""Exports: an analysis frame or a closed month's tables to CSV, Parquet or Excel, the same
figures to the minor unit. Data: a warehouse synced from the sandbox."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import openpyxl
import pandas as pd
import pytest

from paylens import Sandbox, analysis
from paylens._version import __version__
from paylens.close import close_month, closed_tables
from paylens.errors import InvalidArgumentError
from paylens.warehouse import Warehouse

from ._helpers import run_cli

MONTH = "2025-08"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("export") / "w.duckdb"
    with Warehouse(path) as wh:
        wh.sync(Sandbox(seed=31, transactions=1_500).client(), progress=False)
    return path


def _sheet(book: openpyxl.Workbook, name: str) -> list[dict[str, object]]:
    rows = list(book[name].iter_rows(values_only=True))
    return [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]


def _check_excel(path: Path, frames: dict[str, pd.DataFrame]) -> None:
    book = openpyxl.load_workbook(path)
    assert book.sheetnames == [*frames, "provenance"]
    for name, frame in frames.items():
        rows = _sheet(book, name)
        assert len(rows) == len(frame) > 0
        money = [c for c in frame.columns if c.endswith("_minor")]
        for row, want in zip(rows, frame.to_dict("records"), strict=True):
            for column in frame.columns:
                value = want[column]
                assert row[column] == (None if pd.isna(value) else value), (name, column)
            for column in money:
                decimals = want.get("decimals")
                major = column.removesuffix("_minor") + "_major"
                if decimals is None:
                    assert major not in row
                    continue
                exact = Decimal(int(want[column])).scaleb(-int(decimals))
                assert Decimal(str(row[major])) == exact, (name, column)
        # the format of a major cell has the currency's decimals
        sheet = book[name]
        header = [c.value for c in sheet[1]]
        if "decimals" in header and "platform_revenue_major" in header:
            col = header.index("platform_revenue_major")
            for cells, want in zip(
                sheet.iter_rows(min_row=2), frame.to_dict("records"), strict=True
            ):
                d = int(want["decimals"])
                assert cells[col].number_format == ("#,##0." + "0" * d if d else "#,##0")
    # read by pandas: the same integers, the _minor columns unchanged
    back = pd.read_excel(path, sheet_name=None)
    for name, frame in frames.items():
        for column in (c for c in frame.columns if c.endswith(("_minor", "_count"))):
            assert back[name][column].tolist() == frame[column].tolist(), (name, column)
    provenance = dict(_sheet(book, "provenance")[0].items())
    assert provenance["paylens_version"] == __version__
    assert str(provenance["generated_at"]).endswith("Z")


def test_platform_pnl_to_excel_keeps_every_figure_to_the_minor_unit(
    db: Path, tmp_path: Path
) -> None:
    with Warehouse(db, create=False) as wh:
        frame = analysis.platform_pnl(wh)
    assert set(frame["decimals"]) >= {0, 2, 3}  # zero-, two- and three-decimal currencies
    frame.attrs["source"] = "SANDBOX DATA (test)"
    out = analysis.export(frame, tmp_path / "pnl.xlsx")
    assert out == tmp_path / "pnl.xlsx"
    _check_excel(out, {"pnl": frame})
    book = openpyxl.load_workbook(out)
    assert _sheet(book, "provenance")[0]["source"] == "SANDBOX DATA (test)"


def test_a_closed_month_to_excel_one_sheet_per_table(db: Path, tmp_path: Path) -> None:
    with Warehouse(db) as wh:
        snapshot = close_month(wh, MONTH)
        tables = closed_tables(wh, MONTH)
        url = wh.source
    assert list(tables) == ["figures", "transfers", "accruals"]
    stored = json.loads(snapshot)
    for name, frame in tables.items():
        assert frame.to_dict("records") == stored[name], name
    out = analysis.export(tables, tmp_path / "close.xlsx")
    _check_excel(out, tables)
    source = _sheet(openpyxl.load_workbook(out), "provenance")[0]["source"]
    assert source == f"closed period {MONTH} of SANDBOX DATA from {url}"


def test_csv_and_parquet_round_trip(db: Path, tmp_path: Path) -> None:
    with Warehouse(db, create=False) as wh:
        fees = analysis.fee_breakdown(wh)
        pnl = analysis.platform_pnl(wh)
    parquet = analysis.export(fees, tmp_path / "fees.parquet")
    # an all-Arrow frame reads back all-Arrow, every column's type the same
    back = pd.read_parquet(parquet, dtype_backend="pyarrow")
    pd.testing.assert_frame_equal(back, fees, check_dtype=True)
    assert str(back["sent_minor"].dtype) == "int64[pyarrow]"
    back = pd.read_csv(analysis.export(pnl, tmp_path / "pnl.csv"))
    assert back.to_dict("records") == pnl.to_dict("records")
    assert str(back["platform_revenue_minor"].dtype) == "int64"
    folder = analysis.export({"pnl": pnl, "fees": fees}, tmp_path / "both.parquet")
    assert sorted(p.name for p in folder.iterdir()) == ["fees.parquet", "pnl.parquet"]
    pd.testing.assert_frame_equal(pd.read_parquet(folder / "pnl.parquet"), pnl)
    folder = analysis.export({"pnl": pnl}, tmp_path / "some.csv")
    assert [p.name for p in folder.iterdir()] == ["pnl.csv"]


def test_an_unknown_format_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"\.csv, \.parquet or \.xlsx"):
        analysis.export(pd.DataFrame({"a": [1]}), tmp_path / "a.json")
    assert list(tmp_path.iterdir()) == []


def test_the_cli_exports_a_helper_and_a_closed_month(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "pnl.xlsx"
    done = run_cli("export", "--db", str(db), "--what", "platform_pnl", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{out}\n"
    with Warehouse(db, create=False) as wh:
        frame = analysis.platform_pnl(wh)
        close_month(wh, MONTH)
    _check_excel(out, {"pnl": frame})
    out = tmp_path / "owed.csv"
    args = ["--what", "refunds_owed", "--as-of", "2025-11-01", "--out", str(out)]
    assert run_cli("export", "--db", str(db), *args).returncode == 0
    with Warehouse(db, create=False) as wh:
        owed = analysis.refunds_owed(wh, as_of="2025-11-01")
    assert len(owed) > 0
    assert pd.read_csv(out)["owed_minor"].tolist() == owed["owed_minor"].tolist()
    out = tmp_path / "close.xlsx"
    done = run_cli("export", "--db", str(db), "--what", f"closed:{MONTH}", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert openpyxl.load_workbook(out).sheetnames == [
        "figures",
        "transfers",
        "accruals",
        "provenance",
    ]


def test_the_cli_exports_the_balance_rollforward(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "roll.csv"
    done = run_cli("export", "--db", str(db), "--what", "balance_rollforward", "--out", str(out))
    assert done.returncode == 0, done.stderr
    with Warehouse(db, create=False) as wh:
        roll = analysis.balance_rollforward(wh)
    assert len(roll) > 0
    written = pd.read_csv(out)
    for column in ("opening_balance_minor", "closing_balance_minor", "break_minor"):
        assert written[column].tolist() == roll[column].tolist()


@pytest.mark.parametrize(
    ("what", "said"),
    [
        ("pnl", "invalid choice"),
        ("closed:2025-13", "must be YYYY-MM"),
        ("closed:2024-01", "2024-01 is not closed"),
    ],
)
def test_a_bad_what_exits_2_in_one_line(db: Path, tmp_path: Path, what: str, said: str) -> None:
    out = tmp_path / "x.xlsx"
    done = run_cli("export", "--db", str(db), "--what", what, "--out", str(out))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and said in done.stderr, done.stderr
    assert not out.exists()


def test_major_units_are_written_exactly_with_each_currency_decimals(tmp_path: Path) -> None:
    """Each row's major cell has its currency's decimals; a value of more digits than an Excel
    number keeps (15) is the text of its exact digits, never a rounded float."""
    frame = pd.DataFrame(
        {
            "currency": ["BTC", "JPY", "BHD", "USD", "BTC"],
            "decimals": [8, 0, 3, 2, 8],
            "owed_minor": [123456789012345678, 1234567, -1005, 0, 6889893490000001],
            "sent_minor": [1, 2, 3, 4, 5],
            "sent_decimals": [2, 2, 2, 2, 2],
            "count_minor_free": [1, 2, 3, 4, 5],
        }
    )
    out = analysis.export(frame, tmp_path / "m.xlsx")
    sheet = openpyxl.load_workbook(out)["m"]
    header = [c.value for c in sheet[1]]
    assert header == [
        "currency", "decimals", "owed_minor", "owed_major",
        "sent_minor", "sent_major", "sent_decimals", "count_minor_free",
    ]  # fmt: skip
    formats = [sheet.cell(r, 4).number_format for r in range(2, 6)]
    assert formats == ["#,##0.00000000", "#,##0", "#,##0.000", "#,##0.00"]
    assert [sheet.cell(r, 6).number_format for r in range(2, 7)] == ["#,##0.00"] * 5
    assert [sheet.cell(r, 3).value for r in range(2, 7)] == [
        "123456789012345678", 1234567, -1005, 0, "6889893490000001",
    ]  # fmt: skip
    assert [sheet.cell(r, 4).value for r in range(2, 7)] == [
        "1234567890.12345678", 1234567, -1.005, 0, "68898934.90000001",
    ]  # fmt: skip
    assert [sheet.cell(r, 6).value for r in range(2, 7)] == [0.01, 0.02, 0.03, 0.04, 0.05]


def test_the_cli_exports_from_the_embedded_sandbox_times_in_utc(tmp_path: Path) -> None:
    out = tmp_path / "fees.xlsx"
    args = ["--sandbox", "--transactions", "300", "--seed", "4"]
    done = run_cli("export", *args, "--what", "fee_breakdown", "--out", str(out))
    assert done.returncode == 0, done.stderr
    book = openpyxl.load_workbook(out)
    rows = _sheet(book, "fees")
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.sync(Sandbox(seed=4, transactions=300).client(), progress=False)
        fees = analysis.fee_breakdown(wh)
    assert [r["id"] for r in rows] == fees["id"].tolist()
    first = fees.iloc[0]
    assert rows[0]["created_at"] == first["created_at"].tz_convert("UTC").tz_localize(None)
    assert rows[0]["sent_major"] == float(
        Decimal(int(first["sent_minor"])).scaleb(-int(first["sent_decimals"]))
    )
    provenance = _sheet(book, "provenance")[0]
    assert str(provenance["source"]).startswith("SANDBOX DATA") and provenance["times"] == "UTC"


def test_no_warehouse_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    missing, out = tmp_path / "typo.duckdb", tmp_path / "x.csv"
    done = run_cli("export", "--db", str(missing), "--what", "fees_collected", "--out", str(out))
    assert done.returncode == 2
    assert done.stderr == (
        f"paylens export: no warehouse at {missing}: run `paylens sync --db {missing}` first\n"
    )
    assert list(tmp_path.iterdir()) == []
