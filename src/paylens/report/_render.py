"""Running the report notebook with papermill in a kernel without secrets, and writing its HTML."""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from ipykernel import kernelspec
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from traitlets import default

from paylens.errors import InvalidArgumentError, ReportError, WarehouseError

from ._bounds import instant

#: The report notebook, beside the package in the source tree.
NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "report.ipynb"


def render_report(
    db: str | os.PathLike[str],
    *,
    start: date | datetime | str | None = None,
    end: date | datetime | str | None = None,
    currency: str | None = None,
    out: str | os.PathLike[str] = "reports",
    notebook: str | os.PathLike[str] = NOTEBOOK,
    reference_rates: str | os.PathLike[str] | None = None,
    progress: bool = False,
) -> Path:
    """Run the report notebook over the warehouse file `db` for [start, end) (None: all the
    data) in `currency` (None: every currency), and write its HTML (no code cells) beside the
    executed notebook (`.ipynb`); return the HTML's path.

    `out` is a folder (the file in it is `paylens-report_{period}_run-{date}.html`) or a file
    name template ending in `.html`, such as `reports/paylens-{date}.html`: `{date}` is the
    day the report runs (UTC, `2025-10-13`), `{time}` its time (`140211`), `{period}` the
    period's bounds and currency (`2025-09-01_2025-10-01_USD`, `all_all`). A dated name keeps
    each scheduled run's report instead of overwriting the last.

    `progress=True` shows each phase on stderr (tqdm): computing the figures (the notebook's
    cells, one step each, with an ETA) and rendering the HTML.

    The notebook runs in a kernel of this Python whose environment holds no PAYLENS_* secret;
    the database is opened read-only. Raises `ReportError` (with the partial HTML) when a
    tie-out check or any cell failed, and when a secret of the environment shows in the output.
    """
    currency = currency.strip().upper() if currency and currency.strip() else None
    database = Path(db).resolve()
    bounds = [instant(start), instant(end)]
    if bounds[0] and bounds[1] and bounds[0] >= bounds[1]:
        raise InvalidArgumentError(
            "start", f"the period is empty: start {start} is not before end {end}"
        )
    _check_warehouse(database, currency)
    if reference_rates is not None:
        _check_readable("reference_rates", Path(reference_rates))
    page_path = report_path(out, bounds, currency, datetime.now(UTC))
    folder = page_path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file in the way, a folder that cannot be made
        raise InvalidArgumentError(
            "out", f"cannot make the folder {folder}: {exc.strerror or exc}"
        ) from None
    # after the checks: papermill's imports (nbformat, jsonschema) take ~2 s, and a command
    # refused for a missing file or an empty period should say so at once
    import papermill
    from papermill.exceptions import PapermillExecutionError

    executed = page_path.with_suffix(".ipynb")
    parameters = {
        "db": str(database),
        "start": bounds[0].isoformat() if bounds[0] else None,
        "end": bounds[1].isoformat() if bounds[1] else None,
        "currency": currency,
        "reference_rates": None
        if reference_rates is None
        else str(Path(reference_rates).resolve()),
    }
    failure: PapermillExecutionError | None = None
    try:
        papermill.execute_notebook(
            str(notebook),
            str(executed),
            parameters=parameters,
            progress_bar={"desc": PHASES[0], "unit": " cells", "leave": False}
            if progress
            else False,
            kernel_manager_class=_ReportKernel,
            # written once, at the end (or at the failing cell, with its error): not again at
            # each cell's start and end, ~55 writes that took 40 % of this process's CPU
            request_save_on_cell_execute=False,
        )
    except PapermillExecutionError as exc:
        failure = exc
    with _phase(PHASES[1], progress):
        page = _write_html(executed, page_path)
    leaked = _secrets_in(executed.read_text(encoding="utf-8"), page.read_text(encoding="utf-8"))
    if leaked:
        executed.unlink()
        page.unlink()
        raise ReportError(f"the report showed the value of {', '.join(leaked)}; it was deleted")
    if failure is not None:
        raise ReportError(f"{failure.ename}: {failure.evalue}", page)
    return page


def report_name(bounds: list[datetime | None], currency: str | None) -> str:
    """The report's file name: its period's bounds (a day, or the instant when a bound is
    not midnight, so two periods of one day never write one file) and its currency."""

    def bound(moment: datetime | None) -> str:
        if moment is None:
            return "all"
        day = moment.strftime("%Y-%m-%d")
        return day if moment.time() == datetime.min.time() else day + moment.strftime("T%H%M%S%f")

    return "paylens-report_" + "_".join([*map(bound, bounds), *([currency] if currency else [])])


#: The file name in a folder given as `out`.
DEFAULT_NAME = "paylens-report_{period}_run-{date}.html"


def report_path(
    out: str | os.PathLike[str],
    bounds: list[datetime | None],
    currency: str | None,
    now: datetime,
) -> Path:
    """The report's HTML path from `out`: a folder (the default name in it) or a template
    ending in `.html` with `{date}`, `{time}` and `{period}` placeholders."""
    text = os.fspath(out)
    if not text.endswith(".html"):
        if "{" in text:
            raise InvalidArgumentError("out", f"a file name template ends in .html: {text!r}")
        text = os.path.join(text, DEFAULT_NAME)
    period = report_name(bounds, currency).removeprefix("paylens-report_")
    try:
        name = text.format(date=f"{now:%Y-%m-%d}", time=f"{now:%H%M%S}", period=period)
    except (KeyError, IndexError, ValueError) as exc:
        raise InvalidArgumentError(
            "out",
            f"{text!r} is not a file name template ({exc}): use {{date}}, {{time}}, {{period}}",
        ) from None
    return Path(name)


def _check_warehouse(database: Path, currency: str | None) -> None:
    """Refuse at once, before a kernel starts, what the notebook would only find seconds later:
    no file (`WarehouseNotFoundError`), a file that is not a paylens warehouse
    (`WarehouseFileError`), one no sync has filled yet (`WarehouseError`), a currency none of
    its transactions is in (`InvalidArgumentError`)."""
    from paylens.warehouse import Warehouse

    with Warehouse(database, read_only=True) as wh:
        synced = wh.relation("sync_runs").filter("status = 'succeeded'").aggregate("count(*)")
        if not synced.fetchall()[0][0]:
            raise WarehouseError(
                f"no sync has succeeded into {database} yet: run `paylens sync --db {database}` "
                "first"
            )
        if currency is None:
            return
        known = sorted(
            str(row[0])
            for row in wh.relation("transactions").aggregate("currency", "currency").fetchall()
            if row[0] is not None
        )
        if known and currency not in known:
            raise InvalidArgumentError(
                "currency",
                f"no transaction in {database.name} is in {currency} "
                f"(its currencies: {', '.join(known)})",
            )


def _check_readable(argument: str, path: Path) -> None:
    """Refuse at once a file the notebook could not open (none there, a folder): its kernel
    would find it only seconds later, with a partial report."""
    try:
        with path.open("rb") as f:
            f.read(1)
    except OSError as exc:
        raise InvalidArgumentError(argument, f"cannot read {path}: {exc.strerror or exc}") from None


#: What `progress=True` shows, in order.
PHASES = ("report: computing the figures (running the notebook)", "report: rendering the HTML")


@contextmanager
def _phase(description: str, shown: bool) -> Iterator[None]:
    """A one-step bar on stderr for a phase with no steps of its own to count."""
    if not shown:
        yield
        return
    from tqdm.auto import tqdm

    with tqdm(total=1, desc=description, bar_format="{desc} {elapsed}", leave=False) as bar:
        yield
        bar.update(1)


#: nbconvert's logger for the report: its warning that figures lack alternative text (each
#: figure's title says what it shows) would print on every run.
_QUIET = logging.getLogger("paylens.report.nbconvert")
_QUIET.setLevel(logging.ERROR)


def _write_html(executed: Path, page: Path) -> Path:
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True, log=_QUIET
    )
    body, _ = exporter.from_notebook_node(
        nbformat.read(executed, as_version=4), resources={"metadata": {"name": "paylens report"}}
    )
    page.write_text(body, encoding="utf-8")
    return page


#: The secrets paylens reads from the environment, looked for in the report's output: the
#: platform's client secret and a session key's private key (`paylens revoke-sessions`).
_SECRETS = ("PAYLENS_CLIENT_SECRET", "PAYLENS_SESSION_KEY")


def _secrets_in(*texts: str) -> list[str]:
    """The secret variables whose value appears in any of the texts."""
    return [
        name
        for name in _SECRETS
        if (value := os.environ.get(name)) and any(value in t for t in texts)
    ]


def _kernel_environment() -> dict[str, str]:
    """This process's environment without any PAYLENS_* variable: the report's kernel reads
    the database only, so it is given no setting of the service, secret or not."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PAYLENS_")}


class _ThisPython(KernelSpecManager):
    """Kernel specs that always name this very Python (the paylens running the report),
    whatever kernels Jupyter knows."""

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        return KernelSpec(resource_dir=kernelspec.RESOURCES, **kernelspec.get_kernel_dict())


class _ReportKernel(AsyncKernelManager):
    """The report's kernel: this Python, started without the secrets in its environment."""

    @default("kernel_spec_manager")
    def _kernel_spec_manager_default(self) -> KernelSpecManager:
        return _ThisPython(data_dir=self.data_dir)

    async def _async_pre_start_kernel(self, **kw: Any) -> Any:
        kw["env"] = _kernel_environment()
        # the kernel's own chatter (transport warnings, exit noise); cells report via iopub
        kw["stderr"] = subprocess.DEVNULL
        return await super()._async_pre_start_kernel(**kw)
