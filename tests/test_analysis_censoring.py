"""Kaplan–Meier censors open transfers at the sync's time (the service's clock when the
warehouse last read it, which the warehouse records), not at the newest record's; and a
quantile is reported only when its group has enough observations to tell it from the
maximum (p50: 2, p90: 10, p99: 100), NA otherwise, never p90 = p99 of a group of one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from paylens import Sandbox
from paylens.analysis import card_summary, settlement_times
from paylens.warehouse import Warehouse


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Warehouse, Sandbox]]:
    sandbox = Sandbox(seed=3, transactions=2_000)
    path: Path = tmp_path_factory.mktemp("censoring") / "w.duckdb"
    with Warehouse(path) as wh:
        wh.sync(sandbox.client(), progress=False)
        yield wh, sandbox


def test_open_transfers_are_censored_at_the_syncs_time(
    synced: tuple[Warehouse, Sandbox],
) -> None:
    wh, sandbox = synced
    rows = settlement_times(wh)
    open_ = rows[rows["lifecycle"] == "open"]
    assert len(open_) > 5
    now = pd.Timestamp(sandbox.now)
    newest = pd.Timestamp(wh.sql("SELECT max(updated_at) AS t FROM transactions")["t"][0])
    assert newest < now  # the newest record is older than the sync: the two differ
    for r in open_.itertuples():
        assert r.open_seconds == (now - pd.Timestamp(r.created_at)).total_seconds(), r.id
    pd.testing.assert_frame_equal(
        settlement_times(wh, by="rail"), settlement_times(wh, by="rail", as_of=now)
    )


def test_a_quantile_of_too_few_observations_is_na(synced: tuple[Warehouse, Sandbox]) -> None:
    wh, _ = synced
    each = settlement_times(wh, by="id")
    assert len(each) > 100
    assert each[["p50_seconds", "p90_seconds", "p99_seconds"]].isna().all().all()
    rails = settlement_times(wh, by="rail")
    observed = rails["completed_count"] + rails["open_count"]
    for r, n in zip(rails.itertuples(), observed, strict=True):
        assert pd.isna(r.p90_seconds) or n >= 10, r.rail
        assert pd.isna(r.p99_seconds) or n >= 100, r.rail
    few = rails[(observed >= 10) & (observed < 100)]
    assert len(few) and few["p99_seconds"].isna().all()
    assert few["p90_seconds"].notna().any()
    cards = card_summary(wh, by="merchant")
    single = cards[cards["cleared_count"] == 1]
    assert len(single)
    assert single[["settlement_p90_seconds", "settlement_p99_seconds"]].isna().all().all()
    assert single["settlement_p50_seconds"].isna().all()
    many = cards[cards["cleared_count"] >= 10]
    assert many["settlement_p90_seconds"].notna().all()
