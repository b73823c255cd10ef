"""Frames out of paylens: CSV, Parquet or Excel, the same figures to the minor unit.

    export(analysis.platform_pnl(wh), "pnl.xlsx")           # one sheet, and a provenance sheet
    export(closed_tables(wh, "2025-09"), "close-2025-09.xlsx")  # one sheet per table
    export(analysis.fee_breakdown(wh), "fees.parquet")      # Arrow types kept

CSV and Parquet hold each frame as it is. In Excel every `_minor` column stays the exact
integer, followed by its `_major` value (minor / 10^decimals, computed exactly in `Decimal`)
formatted with the currency's decimals, where the frame says them: `P_decimals` for `P_minor`
(`sent_decimals` for `sent_minor`), else a `decimals` column. A `_minor` column whose
currency's decimals the frame does not hold has no `_major` twin. An Excel number holds 15
significant digits: a value with more (a minor amount of 10^15 or more) is written as the
text of its exact digits rather than rounded."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd

from .._version import __version__
from ..errors import InvalidArgumentError

__all__ = ["export"]

_SUFFIXES = (".csv", ".parquet", ".xlsx")
#: Significant digits an Excel number keeps: a value with more is rounded by Excel.
_EXCEL_DIGITS = 15
#: What Excel refuses in a sheet's name (which is also a file's name in a folder of CSVs).
_BAD_NAME = re.compile(r"[\[\]:*?/\\]")


def export(frames: pd.DataFrame | Mapping[str, pd.DataFrame], path: str | Path) -> Path:
    """Write one frame, or several by name, to `path` by its suffix and return the path.

    `.xlsx`: one sheet per frame (a lone frame's sheet is named for the file), then a
    `provenance` sheet (each table's `attrs["source"]`, rows, the UTC time and the paylens
    version). `.csv` or `.parquet`: a lone frame is that file; several are a folder named
    `path` holding one file per name. Excel needs the `export` extra (openpyxl)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in _SUFFIXES:
        raise InvalidArgumentError(
            "path", f"must end in .csv, .parquet or .xlsx, got {path.name!r}"
        )
    one = isinstance(frames, pd.DataFrame)
    tables = {path.stem[:31]: frames} if isinstance(frames, pd.DataFrame) else dict(frames)
    if not tables:
        raise InvalidArgumentError("frames", "no table to export")
    for name in tables:
        if not name or len(name) > 31 or _BAD_NAME.search(name) or name == "provenance":
            raise InvalidArgumentError(
                "frames", f"{name!r} cannot name a sheet (1 to 31 characters, none of []:*?/\\)"
            )
    if suffix == ".xlsx":
        _excel(tables, path)
        return path
    if not one:
        path.mkdir(exist_ok=True)
    for name, frame in tables.items():
        target = path if one else path / f"{name}{suffix}"
        if suffix == ".csv":
            frame.to_csv(target, index=False)
        else:
            frame.to_parquet(target, index=False)
    return path


def _decimals_of(frame: pd.DataFrame, column: str) -> str | None:
    """The column holding the decimals of `column`'s currency, when the frame has one."""
    own = column.removesuffix("_minor") + "_decimals"
    if own in frame.columns:
        return own
    return "decimals" if "decimals" in frame.columns else None


def _number_format(decimals: int) -> str:
    return "#,##0." + "0" * decimals if decimals else "#,##0"


def _cell(value: Any) -> Any:
    """A value as openpyxl writes it: missing as empty, times as naive UTC (Excel has no
    time zones; the provenance sheet says UTC), numpy scalars as Python's."""
    if value is None or (not isinstance(value, (list, dict)) and pd.isna(value)):
        return None
    if isinstance(value, pd.Timestamp):
        if value.tzinfo is not None:
            value = value.tz_convert("UTC").tz_localize(None)
        return value.to_pydatetime()
    return value.item() if hasattr(value, "item") else value


def _excel_number(value: int | Decimal) -> int | Decimal | str:
    """`value` as a number cell when Excel holds it exactly, else as the text of its digits
    (openpyxl writes 16 significant digits; Excel keeps 15)."""
    exact = Decimal(value)
    return format(exact, "f") if len(exact.as_tuple().digits) > _EXCEL_DIGITS else value


def _excel(tables: dict[str, pd.DataFrame], path: Path) -> None:
    try:
        from openpyxl import Workbook
    except ImportError as exc:  # an optional extra
        raise InvalidArgumentError(
            "path", "writing .xlsx needs openpyxl: pip install 'paylens[export]'"
        ) from exc

    book = Workbook()
    book.remove(book.active)  # type: ignore[arg-type]  # the default empty sheet
    generated = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for name, frame in tables.items():
        sheet = book.create_sheet(name)
        money = {
            c: d
            for c in frame.columns
            if str(c).endswith("_minor")
            and (d := _decimals_of(frame, str(c))) is not None
            and str(c).removesuffix("_minor") + "_major" not in frame.columns
        }
        header: list[str] = []
        for column in frame.columns:
            header.append(str(column))
            if column in money:
                header.append(str(column).removesuffix("_minor") + "_major")
        sheet.append(header)
        for record in frame.to_dict("records"):
            row: list[Any] = []
            formats: dict[int, str] = {}
            for key, value in record.items():
                row.append(_cell(value))
                if isinstance(row[-1], int) and not isinstance(row[-1], bool):
                    row[-1] = _excel_number(row[-1])
                if key in money:
                    minor, decimals = _cell(value), _cell(record[money[key]])
                    if minor is None or decimals is None:
                        row.append(None)
                        continue
                    # exact: an int over a power of ten in Decimal, never a rounded float
                    row.append(_excel_number(Decimal(int(minor)) / (10 ** int(decimals))))
                    formats[len(row)] = _number_format(int(decimals))
            sheet.append(row)
            for index, number_format in formats.items():
                sheet.cell(sheet.max_row, index).number_format = number_format
    provenance = book.create_sheet("provenance")
    provenance.append(["table", "rows", "source", "generated_at", "paylens_version", "times"])
    for name, frame in tables.items():
        source = frame.attrs.get("source")
        provenance.append(
            [
                name,
                len(frame),
                None if source is None else str(source),
                generated,
                __version__,
                "UTC",
            ]
        )
    book.save(path)
