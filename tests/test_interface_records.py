"""Records that are valid per the interface description but unlike the sandbox's, served by a
small fake service of our own (an `httpx.MockTransport` handler; nothing from
`paylens.sandbox`), synced into a warehouse and read back.

The records are generated from the interface's component schemas (`$ref`s resolved into one
self-contained schema each) with hypothesis-jsonschema. Only what the specification itself says
is constrained on top: ids of the form `<Type>:<uuid>` and unique, `createdAt` an RFC 3339
instant (not after the service's clock), a card transaction's `createdAt` equal to its
`authorizedAt`, integers within int64, currency codes as the interface describes them (ISO 4217
or a ticker). Everything else (absent optional fields, extra properties, non-ASCII text, any
offset or fraction of a date-time) is left to the schema.

The fake service answers the list endpoints as the interface describes them: `startDate` and
`endDate` inclusive on `createdAt`, `status` and `type` exact, `sortOrder` (default desc),
`limit` (default 20), an opaque `cursor`, `hasMore`/`nextCursor`, and a `totalCount` exact for
the filter; customers by `updatedAfter` (inclusive) and `isIncludingDeleted`.

The properties draw from the schemas, which takes hypothesis-jsonschema seconds per example:
they run with `pytest -m slow`. The deterministic cases at the end run by default, among them
what the properties found (an extra field holding an integer past 64 bits stopped a sync;
refund times in lower-case RFC 3339 stopped `refund_summary`).
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from ._helpers import OPENAPI as SPEC
from ._helpers import interface

BASE = "https://api.example.com/2025-10-13"
NOW = datetime(2025, 10, 13, tzinfo=UTC)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

pytestmark = pytest.mark.skipif(not SPEC.exists(), reason="the interface description is absent")

# -- the interface's schemas, resolved ------------------------------------------------------

#: annotation keywords of OpenAPI that are no JSON Schema constraint (dropped, except where they
#: name a property)
_ANNOTATIONS = {
    "description",
    "example",
    "examples",
    "discriminator",
    "readOnly",
    "writeOnly",
    "title",
    "deprecated",
    "xml",
    "externalDocs",
}

#: Currency codes as the interface describes them: ISO 4217 for fiat (three letters, some with
#: 0 or 3 decimals), tickers for crypto.
CURRENCY_CODES = ["USD", "EUR", "JPY", "KWD", "MXN", "BTC", "USDC", "ETH", "XOF", "SAT"]


def _components() -> dict[str, Any]:
    schemas: dict[str, Any] = interface()["components"]["schemas"]
    return schemas


#: bound of every integer (int64 by default; the analysis tie-out uses smaller ones, so that
#: per-currency sums stay within int64 and float64 conversions stay exact)
_BOUND = {"low": INT64_MIN, "high": INT64_MAX, "rate": None}


def _resolve(node: Any, stack: tuple[str, ...] = (), *, properties: bool = False) -> Any:
    """A schema with every `$ref` inlined, OpenAPI annotations dropped and the constraints the
    specification states (int64 integers, currency codes) written in."""
    if isinstance(node, list):
        return [_resolve(x, stack) for x in node]
    if not isinstance(node, dict):
        return node
    if properties:  # keys are property names: keep them all
        return {k: _resolve(v, stack) for k, v in node.items()}
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in stack:
            raise RuntimeError(f"recursive schema {name}")
        out = _currency() if name == "Currency" else _resolve(_components()[name], (*stack, name))
        rest = {k: v for k, v in node.items() if k != "$ref" and k not in _ANNOTATIONS}
        return {"allOf": [out, _resolve(rest, stack)]} if rest else out
    out = {
        k: _resolve(v, stack, properties=k in ("properties", "patternProperties"))
        for k, v in node.items()
        if k not in _ANNOTATIONS
    }
    types = out.get("type")
    types = types if isinstance(types, list) else [types]
    if "integer" in types or ("number" in types and out.get("format") == "int64"):
        # "int64": an integer in range (a `number` of format int64 is an integer too)
        if "number" in types:
            out["type"] = ["integer" if t == "number" else t for t in types]
            if len(out["type"]) == 1:
                out["type"] = "integer"
        out["minimum"] = max(out.get("minimum", _BOUND["low"]), _BOUND["low"])
        out["maximum"] = min(out.get("maximum", _BOUND["high"]), _BOUND["high"])
    elif "number" in types and _BOUND["rate"] is not None:
        out["maximum"] = min(out.get("maximum", _BOUND["rate"]), _BOUND["rate"])
        out["minimum"] = max(out.get("minimum", -_BOUND["rate"]), -_BOUND["rate"])
    return out


def _currency() -> dict[str, Any]:
    currency = copy.deepcopy(_resolve(_components()["Currency"], ("Currency",)))
    currency["properties"]["code"] = {"type": "string", "enum": CURRENCY_CODES}
    currency["properties"]["decimals"] = {"type": "integer", "minimum": 0, "maximum": 18}
    return currency


@functools.cache
def schema(name: str, bounded: bool = False) -> dict[str, Any]:
    """The resolved schema of a component; `bounded`: integers within +-10^12 and numbers
    within +-10^6 (realistic magnitudes, for the tie-out of sums)."""
    saved = dict(_BOUND)
    if bounded:
        _BOUND.update(low=-(10**12), high=10**12, rate=10**6)
    try:
        return _resolve({"$ref": f"#/components/schemas/{name}"})
    finally:
        _BOUND.update(saved)


# -- generating records ---------------------------------------------------------------------


def rfc3339(*, low: datetime = datetime(1970, 1, 1, tzinfo=UTC), high: datetime = NOW) -> Any:
    """RFC 3339 date-times (section 5.6): any offset, `T`/`t`, `Z`/`z`, 0 to 9 fraction digits,
    within [low, high] as instants."""
    from hypothesis import strategies as st

    def spell(args: tuple[datetime, int, int, str, str, int]) -> str:
        instant, offset_minutes, digits, t, z, nanos = args
        local = instant.astimezone(UTC) + timedelta(minutes=offset_minutes)
        fraction = f"{local.microsecond:06d}{nanos:03d}"[:digits]
        text = local.strftime("%Y-%m-%d") + t + local.strftime("%H:%M:%S")
        if digits:
            text += "." + fraction
        if offset_minutes == 0 and z:
            return text + z
        sign = "+" if offset_minutes >= 0 else "-"
        hours, minutes = divmod(abs(offset_minutes), 60)
        return f"{text}{sign}{hours:02d}:{minutes:02d}"

    return st.tuples(
        st.datetimes(
            min_value=low.replace(tzinfo=None),
            max_value=high.replace(tzinfo=None),
            timezones=st.just(UTC),
        ),
        st.one_of(st.just(0), st.integers(-23 * 60 - 59, 23 * 60 + 59)),
        st.integers(0, 9),
        st.sampled_from(["T", "t"]),
        st.sampled_from(["Z", "z", ""]),
        st.integers(0, 999),
    ).map(spell)


def instant(text: str) -> datetime:
    """The UTC instant an RFC 3339 date-time names, to the microsecond (a finer fraction cut)."""
    import re

    text = text.upper()
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def from_interface(name: str, bounded: bool = False) -> Any:
    from hypothesis_jsonschema import from_schema

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding standard format 'date-time'": intended
        return from_schema(
            schema(name, bounded),
            custom_formats={"date-time": rfc3339(high=datetime(2100, 1, 1, tzinfo=UTC))},
        )


def _same(value: Any) -> Any:
    return value


def clamp(value: Any, bound: int = 10**12) -> Any:
    """Integers anywhere (extra properties too) within +-bound: the tie-out is about sums, not
    about integers past 64 bits (kept exactly: see the deterministic case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return max(-bound, min(bound, value))
    if isinstance(value, dict):
        return {k: clamp(v, bound) for k, v in value.items()}
    if isinstance(value, list):
        return [clamp(v, bound) for v in value]
    return value


PREFIX = {"INCOMING": "Transaction", "OUTGOING": "Transaction", "CARD": "CardTransaction"}


def fix_transaction(record: dict[str, Any], n: int, created: str) -> dict[str, Any]:
    record = dict(record)
    record["id"] = f"{PREFIX[record['type']]}:{uuid.UUID(int=n + 1)}"
    record["createdAt"] = created
    if record["type"] == "CARD":
        record["authorizedAt"] = created  # "createdAt: Equals authorizedAt"
    return record


def fix_resource(prefix: str, record: dict[str, Any], n: int) -> dict[str, Any]:
    return {**record, "id": f"{prefix}:{uuid.UUID(int=(n + 1) << 64)}"}


def transactions(max_size: int = 8, bounded: bool = False) -> Any:
    from hypothesis import strategies as st

    one = st.tuples(
        from_interface("TransactionOneOf", bounded).map(clamp if bounded else _same),
        rfc3339(low=datetime(2024, 1, 1, tzinfo=UTC)),
    )
    return st.lists(one, max_size=max_size).map(
        lambda items: [fix_transaction(r, n, c) for n, (r, c) in enumerate(items)]
    )


def resources(name: str, prefix: str, max_size: int = 4) -> Any:
    from hypothesis import strategies as st

    return st.lists(from_interface(name), max_size=max_size).map(
        lambda items: [fix_resource(prefix, r, n) for n, r in enumerate(items)]
    )


# -- the fake service -----------------------------------------------------------------------


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o{offset}".encode()).decode()


def _offset(cursor: str) -> int:
    return int(base64.urlsafe_b64decode(cursor.encode()).decode()[1:])


@dataclass
class FakeService:
    """The list endpoints of the interface over fixed records."""

    transactions: list[dict[str, Any]] = field(default_factory=list)
    customers: list[dict[str, Any]] = field(default_factory=list)
    cards: list[dict[str, Any]] = field(default_factory=list)
    internal_accounts: list[dict[str, Any]] = field(default_factory=list)
    external_accounts: list[dict[str, Any]] = field(default_factory=list)
    now: datetime = NOW
    #: each page after the first starts this many records early (a record moved between pages)
    overlap: int = 0
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def handler(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/2025-10-13")
        query = dict(request.url.params)
        self.requests.append((path, query))
        headers = {"Date": self.now.strftime("%a, %d %b %Y %H:%M:%S GMT")}
        lists: dict[str, Callable[[dict[str, str]], list[dict[str, Any]]]] = {
            "/transactions": self._transactions,
            "/customers": self._customers,
            "/cards": lambda q: self.cards,
            "/customers/internal-accounts": lambda q: self.internal_accounts,
            "/platform/internal-accounts": lambda q: [],
            "/customers/external-accounts": lambda q: self.external_accounts,
            "/platform/external-accounts": lambda q: [],
        }
        if path in lists and request.method == "GET":
            return httpx.Response(200, json=self._page(lists[path](query), query), headers=headers)
        if path == "/config":
            return httpx.Response(
                404, json={"status": 404, "code": "NOT_FOUND", "message": "no"}, headers=headers
            )
        return httpx.Response(
            404, json={"status": 404, "code": "NOT_FOUND", "message": path}, headers=headers
        )

    def _page(self, records: list[dict[str, Any]], query: dict[str, str]) -> dict[str, Any]:
        limit = int(query.get("limit", 20))
        start = _offset(query["cursor"]) if query.get("cursor") else 0
        page = records[start : start + limit]
        after = start + limit
        more = after < len(records)
        body: dict[str, Any] = {"data": page, "hasMore": more, "totalCount": len(records)}
        if more:
            body["nextCursor"] = _cursor(max(after - self.overlap, start + 1))
        return body

    def _transactions(self, q: dict[str, str]) -> list[dict[str, Any]]:
        out = self.transactions
        # `createdAt` is optional on transfers: a record without it matches no date filter
        if "startDate" in q:
            low = instant(q["startDate"])
            out = [r for r in out if "createdAt" in r and instant(r["createdAt"]) >= low]
        if "endDate" in q:
            high = instant(q["endDate"])
            out = [r for r in out if "createdAt" in r and instant(r["createdAt"]) <= high]
        if "status" in q:
            out = [r for r in out if r.get("status") == q["status"]]
        if "type" in q:
            out = [r for r in out if r.get("type") == q["type"]]
        return sorted(
            out,
            key=lambda r: (instant(r.get("createdAt", "1970-01-01T00:00:00Z")), r["id"]),
            reverse=q.get("sortOrder", "desc") == "desc",
        )

    def _customers(self, q: dict[str, str]) -> list[dict[str, Any]]:
        out = self.customers
        if q.get("isIncludingDeleted", "false") != "true":
            out = [r for r in out if r.get("isDeleted") is not True]
        if "updatedAfter" in q:
            low = instant(q["updatedAfter"])
            out = [r for r in out if "updatedAt" in r and instant(r["updatedAt"]) >= low]
        return out

    def client(self) -> Any:
        from paylens.client import Client

        return Client(
            BASE, "id", "secret", transport=httpx.MockTransport(self.handler), max_retries=0
        )


@contextmanager
def synced(service: FakeService, **options: Any) -> Iterator[tuple[Any, Any]]:
    """A fresh warehouse after one sync of the fake service: (warehouse, report)."""
    from paylens.warehouse import Warehouse

    with (
        tempfile.TemporaryDirectory(dir="/tmp") as folder,
        Warehouse(Path(folder) / "w.duckdb") as wh,
        service.client() as client,
    ):
        report = wh.sync(client, progress=False, concurrency=2, **options)
        yield wh, report


# -- what is stored -------------------------------------------------------------------------


def rows(wh: Any, table: str, columns: str = "id, raw") -> list[dict[str, Any]]:
    frame = wh.sql(f"SELECT {columns} FROM {table}")
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


def rejected(wh: Any) -> list[dict[str, Any]]:
    return rows(wh, "rejected_records", "resource, record_id, error")


def check_table(wh: Any, table: str, sent: list[dict[str, Any]]) -> None:
    """Every record sent is in `table` exactly once, its raw JSON the record sent."""
    stored = rows(wh, table)
    ids = [r["id"] for r in stored]
    assert sorted(ids) == sorted(r["id"] for r in sent), (table, rejected(wh))
    by_id = {r["id"]: json.loads(r["raw"]) for r in stored}  # exact: any integer
    for record in sent:
        assert by_id[record["id"]] == record, (table, record["id"])


def money(record: dict[str, Any], name: str) -> tuple[Any, Any, Any]:
    value = record.get(name)
    if not isinstance(value, dict):
        return None, None, None
    currency = value.get("currency") or {}
    return value.get("amount"), currency.get("code"), currency.get("decimals")


def when(record: dict[str, Any], name: str) -> datetime | None:
    value = record.get(name)
    return None if value is None else instant(value)


HEADLINE = {"OUTGOING": "sentAmount", "INCOMING": "receivedAmount", "CARD": "authorizedAmount"}


def check_transaction_values(wh: Any, sent: list[dict[str, Any]]) -> None:
    stored = {
        r["id"]: r
        for r in rows(
            wh,
            "transactions",
            "id, type, status, amount_minor, currency, decimals, sent_amount_minor, "
            "sent_amount_currency, sent_amount_decimals, received_amount_minor, "
            "received_amount_currency, received_amount_decimals, fees_minor, created_at, "
            "updated_at, settled_at",
        )
    }
    for record in sent:
        row = stored[record["id"]]
        assert (row["type"], row["status"]) == (record["type"], record["status"]), record["id"]
        assert (row["amount_minor"], row["currency"], row["decimals"]) == money(
            record, HEADLINE[record["type"]]
        ), record["id"]
        if record["type"] != "CARD":
            for name, prefix in (
                ("sentAmount", "sent_amount"),
                ("receivedAmount", "received_amount"),
            ):
                got = tuple(row[f"{prefix}_{part}"] for part in ("minor", "currency", "decimals"))
                assert got == money(record, name), (record["id"], name)
            assert row["fees_minor"] == record.get("fees"), record["id"]
            assert row["settled_at"] == when(record, "settledAt"), record["id"]
        assert row["created_at"] == when(record, "createdAt"), record["id"]
        assert row["updated_at"] == when(record, "updatedAt"), record["id"]


def check_card_values(wh: Any, sent: list[dict[str, Any]]) -> None:
    stored = {
        r["id"]: r
        for r in rows(
            wh,
            "card_transactions",
            "id, status, authorized_amount_minor, authorized_amount_currency, "
            "authorized_amount_decimals, settled_amount_minor, refunded_amount_minor, "
            "authorized_at, created_at, updated_at, last_event_at",
        )
    }
    cards = [r for r in sent if r["type"] == "CARD"]
    assert sorted(stored) == sorted(r["id"] for r in cards)
    for record in cards:
        row = stored[record["id"]]
        assert row["status"] == record["status"]
        assert (
            row["authorized_amount_minor"],
            row["authorized_amount_currency"],
            row["authorized_amount_decimals"],
        ) == money(record, "authorizedAmount")
        assert row["settled_amount_minor"] == money(record, "settledAmount")[0]
        assert row["refunded_amount_minor"] == money(record, "refundedAmount")[0]
        for name in ("authorizedAt", "createdAt", "updatedAt", "lastEventAt"):
            column = {
                "authorizedAt": "authorized_at",
                "createdAt": "created_at",
                "updatedAt": "updated_at",
                "lastEventAt": "last_event_at",
            }[name]
            assert row[column] == when(record, name), (record["id"], name)


def check_fees_values(wh: Any, sent: list[dict[str, Any]]) -> None:
    outgoing = [r for r in sent if r["type"] == "OUTGOING"]
    stored = {
        r["id"]: r
        for r in rows(
            wh,
            "outgoing_fees",
            "id, fees_minor, platform_fees_minor, "
            "grid_api_fixed_fee_minor, grid_api_variable_fee_amount_minor, "
            "counterparty_fixed_fee_minor",
        )
    }
    assert sorted(stored) == sorted(r["id"] for r in outgoing)
    for record in outgoing:
        row = stored[record["id"]]
        details = record.get("rateDetails") or {}
        assert row["fees_minor"] == record.get("fees")
        assert row["platform_fees_minor"] == record.get("platformFees")
        assert row["grid_api_fixed_fee_minor"] == details.get("gridApiFixedFee")
        assert row["grid_api_variable_fee_amount_minor"] == details.get("gridApiVariableFeeAmount")
        assert row["counterparty_fixed_fee_minor"] == details.get("counterpartyFixedFee")
    instructions = rows(wh, "payment_instructions", "transaction_id, position")
    expected = sorted(
        (r["id"], i) for r in outgoing for i, _ in enumerate(r.get("paymentInstructions") or [])
    )
    assert sorted((r["transaction_id"], r["position"]) for r in instructions) == expected


def check_run(wh: Any, report: Any) -> None:
    last = wh.last_sync()
    assert last["status"] == "succeeded", last


def run_analysis(wh: Any) -> None:
    """Every helper runs over the warehouse; a refusal must be typed (a PaylensError)."""
    from paylens import analysis
    from paylens.errors import InvalidArgumentError

    helpers = [
        lambda: analysis.fee_breakdown(wh, status=None),
        lambda: analysis.settlement_times(wh),
        lambda: analysis.failure_breakdown(wh),
        lambda: analysis.card_summary(wh),
        lambda: analysis.refund_summary(wh),
        lambda: analysis.fees_collected(wh, status=None),
    ]
    for helper in helpers:
        try:
            helper()
        except InvalidArgumentError as exc:  # typed: a total past int64 (amounts near its limits)
            assert "past the int64 range" in str(exc), exc


def check_analysis(wh: Any, sent: list[dict[str, Any]]) -> None:
    """The helpers run, and their per-currency sums of minor units tie to the raw records."""
    from paylens import analysis

    fees = analysis.fee_breakdown(wh, status=None)
    analysis.settlement_times(wh)
    analysis.failure_breakdown(wh)
    cards = analysis.card_summary(wh)
    analysis.refund_summary(wh)
    analysis.fees_collected(wh, status=None)

    def sums(
        records: list[dict[str, Any]],
        value: Callable[[dict[str, Any]], Any],
        cur: Callable[[dict[str, Any]], Any],
    ) -> dict[Any, int]:
        out: dict[Any, int] = {}
        for r in records:
            v = value(r)
            if v is not None:
                out[cur(r)] = out.get(cur(r), 0) + int(v)
        return out

    def frame_sums(frame: Any, value: str, cur: str) -> dict[Any, int]:
        out: dict[Any, int] = {}
        import pandas as pd

        for c, v in zip(frame[cur], frame[value], strict=True):
            c = None if pd.isna(c) else c
            if pd.isna(v):
                continue
            out[c] = out.get(c, 0) + int(v)
        return out

    outgoing = [r for r in sent if r["type"] == "OUTGOING"]
    expected = sums(outgoing, lambda r: r.get("fees"), lambda r: money(r, "sentAmount")[1])
    got = frame_sums(fees, "fees_minor", "sent_currency")
    assert got == expected, (got, expected)
    expected = sums(
        outgoing, lambda r: money(r, "sentAmount")[0], lambda r: money(r, "sentAmount")[1]
    )
    assert frame_sums(fees, "sent_minor", "sent_currency") == expected
    card = [r for r in sent if r["type"] == "CARD"]
    expected = sums(
        card, lambda r: money(r, "authorizedAmount")[0], lambda r: money(r, "authorizedAmount")[1]
    )
    assert frame_sums(cards, "authorized_minor", "currency") == expected


# -- the properties -------------------------------------------------------------------------


def _settings(examples: int) -> Any:
    from hypothesis import HealthCheck, Phase, settings

    # no shrinking: a sync per example makes shrinking take minutes; each failure this
    # finds has its minimal reproduction below (test_finding_*)
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate],
    )


@pytest.mark.slow  # hypothesis-jsonschema takes seconds to draw from the interface's schemas
def test_interface_valid_transactions_sync_whole_and_exact() -> None:
    """Promises 1-3 (and the helpers' typed refusals) over transactions of all three kinds,
    every integer anywhere in int64... except in extra properties, which hold any JSON."""
    from hypothesis import given

    @_settings(15)
    @given(transactions(8))
    def run(sent: list[dict[str, Any]]) -> None:
        service = FakeService(transactions=sent)
        with synced(service) as (wh, report):
            check_run(wh, report)
            assert rejected(wh) == []
            check_table(wh, "transactions", sent)
            check_transaction_values(wh, sent)
            check_card_values(wh, sent)
            check_fees_values(wh, sent)
            run_analysis(wh)

    run()


@pytest.mark.slow
def test_analysis_ties_out_on_interface_valid_transactions() -> None:
    """Promise 4: with realistic magnitudes (so per-currency sums stay in int64), every helper
    runs and the sums of minor units tie to the raw records."""
    from hypothesis import given

    @_settings(15)
    @given(transactions(8, bounded=True))
    def run(sent: list[dict[str, Any]]) -> None:
        with synced(FakeService(transactions=sent)) as (wh, report):
            check_run(wh, report)
            assert rejected(wh) == []
            check_analysis(wh, sent)

    run()


@pytest.mark.slow
def test_interface_valid_resources_sync_whole_and_exact() -> None:
    """Promises 1-3 for customers, cards, internal and external accounts."""
    from hypothesis import given
    from hypothesis import strategies as st

    @_settings(10)
    @given(
        st.tuples(
            resources("CustomerOneOf", "Customer"),
            resources("Card", "Card"),
            resources("InternalAccount", "InternalAccount"),
            resources("ExternalAccount", "ExternalAccount"),
        )
    )
    def run(args: tuple[list[dict[str, Any]], ...]) -> None:
        customers, cards, internal, external = args
        service = FakeService(
            customers=customers, cards=cards, internal_accounts=internal, external_accounts=external
        )
        with synced(service) as (wh, report):
            check_run(wh, report)
            assert rejected(wh) == []
            check_table(wh, "customers", customers)
            check_table(wh, "cards", cards)
            check_table(wh, "internal_accounts", internal)
            check_table(wh, "external_accounts", external)

    run()


@pytest.mark.slow
def test_interface_valid_transactions_many_examples() -> None:
    """The first property with more examples and bigger pages (slow)."""
    from hypothesis import given

    @_settings(150)
    @given(transactions(30))
    def run(sent: list[dict[str, Any]]) -> None:
        with synced(FakeService(transactions=sent, overlap=1)) as (wh, report):
            check_run(wh, report)
            assert rejected(wh) == []
            check_table(wh, "transactions", sent)
            check_transaction_values(wh, sent)

    run()


# -- deterministic cases: what held, and the minimal reproductions of the findings -----------


def transfer(n: int = 1, **fields: Any) -> dict[str, Any]:
    """A small interface-valid OUTGOING transfer; `fields` replace or add wire fields."""
    record = {
        "id": f"Transaction:{uuid.UUID(int=n)}",
        "type": "OUTGOING",
        "status": "COMPLETED",
        "direction": "DEBIT",
        "source": {"sourceType": "ACCOUNT", "accountId": "InternalAccount:1"},
        "destination": {"destinationType": "ACCOUNT", "accountId": "ExternalAccount:1"},
        "customerId": "Customer:1",
        "platformCustomerId": "p-1",
        "createdAt": f"2025-10-01T00:{n // 60 % 60:02d}:{n % 60:02d}Z",
        "sentAmount": {"amount": 100, "currency": {"code": "USD", "decimals": 2}},
        "fees": 3,
    }
    record.update(fields)
    return record


def test_a_record_on_two_pages_is_stored_once() -> None:
    """Held: pages that overlap (a record moved between pages while paginating) double nothing,
    and totalCount ties."""
    sent = [transfer(n) for n in range(1, 251)]
    for overlap in (1, 7):
        with synced(FakeService(transactions=sent, overlap=overlap)) as (wh, report):
            check_run(wh, report)
            assert rejected(wh) == []
            check_table(wh, "transactions", sent)


def test_unknown_enum_values_and_kinds_are_kept() -> None:
    """Held: an unknown status, rail and a transaction type this version does not know are
    stored as sent (the README: "unknown enum values ... are kept, never a crash")."""
    sent = [
        transfer(1, status="ON_HOLD", paymentRail="NEW_RAIL", railSelectionMode="HYBRID"),
        {
            "id": f"Transaction:{uuid.UUID(int=2)}",
            "type": "STABLECOIN",
            "status": "COMPLETED",
            "direction": "DEBIT",
            "customerId": "Customer:1",
            "platformCustomerId": "p-1",
            "createdAt": "2025-10-01T00:00:02Z",
            "destination": {"destinationType": "ACCOUNT", "accountId": "x"},
        },
    ]
    with synced(FakeService(transactions=sent)) as (wh, report):
        check_run(wh, report)
        assert rejected(wh) == []
        check_table(wh, "transactions", sent)


def test_odd_but_valid_spellings_are_stored_exactly() -> None:
    """Held: offsets, `t`/`z`, nine fraction digits, a transfer without `createdAt`, long and
    non-ASCII text, a NUL character, extra fields."""
    sent = [
        transfer(
            1, createdAt="2025-10-01t05:30:00.123456789+05:30", updatedAt="2025-10-02T00:00:00z"
        ),
        transfer(2, description="é😀" * 50_000, extraField={"nested": [1, 2.5, None, "ü"]}),
        transfer(3, description="a\x00b"),
        {k: v for k, v in transfer(4).items() if k != "createdAt"},
    ]
    with synced(FakeService(transactions=sent)) as (wh, report):
        check_run(wh, report)
        assert rejected(wh) == []
        check_table(wh, "transactions", sent)
        check_transaction_values(wh, [r for r in sent if "createdAt" in r])


def test_an_extra_field_holding_any_integer_is_kept_exactly() -> None:
    """An extra property (the conventions promise "extra fields") holding an integer
    below -2**63 or past ~10**20 is stored, its raw JSON exactly as sent, beside the other
    records of its page (it made simdjson raise, which stopped the sync)."""
    for value in (-(2**63) - 1, 10**30):
        sent = [transfer(1, extra=value), transfer(2)]
        with synced(FakeService(transactions=sent)) as (wh, report):
            check_run(wh, report)
            check_table(wh, "transactions", sent)


def test_refund_times_in_lower_case_rfc3339_are_read() -> None:
    """`refund.initiatedAt` spelt with a lower-case `t` (or `z`) is valid RFC 3339: the refund's
    time is read (it made `refund_summary` raise a wrong "past the int64 range" error)."""
    from paylens import analysis

    for spelling in ("2025-10-01t01:00:00Z", "2025-10-01T01:00:00z"):
        refund = {
            "reference": "R-1",
            "initiatedAt": spelling,
            "status": "COMPLETED",
            "settledAt": "2025-10-02T00:00:00Z",
            "reason": "TRANSACTION_FAILED",
        }
        sent = [transfer(1, status="FAILED", failureReason="QUOTE_EXECUTION_FAILED", refund=refund)]
        with synced(FakeService(transactions=sent)) as (wh, report):
            check_run(wh, report)
            check_table(wh, "transactions", sent)
            summary = analysis.refund_summary(wh, by=[], as_of="2025-10-03")
            assert summary["refunded_count"].tolist() == [1]
            rows = analysis.refund_summary(wh, as_of="2025-10-03")
            assert rows["refund_seconds"].tolist() == [23 * 3600]  # 01:00 to the next midnight
            assert summary["p50_seconds"].isna().all()  # one refund is too few for a median


def test_a_variable_fee_amount_spelt_as_a_whole_json_number_is_stored_exactly() -> None:
    """The interface types `gridApiVariableFeeAmount` as a JSON `number` (format int64): `30.0`
    is 30 minor units, stored beside the raw record as it came; `30.5` has no smallest unit
    and is set aside alone, never rounded."""
    rate = {
        "counterpartyMultiplier": 1.0,
        "counterpartyFixedFee": 0,
        "gridApiMultiplier": 0.925,
        "gridApiFixedFee": 10,
        "gridApiVariableFeeRate": 0.003,
    }
    whole = transfer(1, rateDetails={**rate, "gridApiVariableFeeAmount": 30.0})
    part = transfer(2, rateDetails={**rate, "gridApiVariableFeeAmount": 30.5})
    with synced(FakeService(transactions=[whole, part, transfer(3)])) as (wh, report):
        check_run(wh, report)
        fees = rows(wh, "outgoing_fees", "id, grid_api_variable_fee_amount_minor AS v")
        assert {r["id"]: r["v"] for r in fees} == {whole["id"]: 30, transfer(3)["id"]: None}
        raw = rows(wh, "transactions", "id, raw")
        assert json.loads(next(r["raw"] for r in raw if r["id"] == whole["id"])) == whole
        assert [r["record_id"] for r in rejected(wh)] == [part["id"]]


def test_currency_decimals_past_127_are_stored() -> None:
    """The interface bounds a currency's `decimals` below only (>= 0): 200 is valid, and the
    transfer is stored with it (an int8 column set the whole record aside)."""
    wide = {"amount": 100, "currency": {"code": "XTS", "decimals": 200}}
    sent = [transfer(1, sentAmount=wide), transfer(2)]
    with synced(FakeService(transactions=sent)) as (wh, report):
        check_run(wh, report)
        check_table(wh, "transactions", sent)
        stored = rows(wh, "transactions", "id, decimals, sent_amount_decimals AS sent")
        assert {r["id"]: (r["decimals"], r["sent"]) for r in stored} == {
            sent[0]["id"]: (200, 200),
            sent[1]["id"]: (2, 2),
        }


def test_a_card_expiry_year_of_any_int64_is_stored() -> None:
    """The interface describes `expYear` as four digits but bounds it by nothing: any int64 is
    stored as sent (a 16-bit column set the card aside)."""
    card = {
        "id": "Card:00000000-0000-0001-0000-000000000000",
        "cardholderId": "Customer:1",
        "state": "ACTIVE",
        "form": "VIRTUAL",
        "fundingSources": ["InternalAccount:1"],
        "maxSpendPerTransaction": 5000,
        "createdAt": "2025-10-01T00:00:00Z",
        "updatedAt": "2025-10-01T00:00:00Z",
        "expMonth": 6,
        "expYear": -6_147_106_176_600_770,
    }
    with synced(FakeService(cards=[card])) as (wh, report):
        check_run(wh, report)
        check_table(wh, "cards", [card])
        assert rows(wh, "cards", "exp_month, exp_year") == [
            {"exp_month": 6, "exp_year": -6_147_106_176_600_770}
        ]
