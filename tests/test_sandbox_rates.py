"""The sandbox's exchange rates move with its clock: a daily mid rate per corridor, seeded smooth
noise around the reference, within a documented band, the same for the same seed and day; quotes,
generated transactions, `/exchange-rates` and `mid_rate_series` all follow it, and a quote
executed after the rate moved past its spread fails with QUOTE_RATE_UNAVAILABLE."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import numpy as np

from paylens import Sandbox
from paylens.sandbox import mid_rate_series
from paylens.sandbox.currencies import (
    CURRENCY_CODES,
    CURRENCY_GROUP,
    CURRENCY_INDEX,
    QUOTE_SPREAD,
    SPREAD_BY_GROUP,
    mid_rate,
)
from paylens.sandbox.midrates import RATE_BAND, mid_rates
from paylens.sandbox.world.world import World

from .test_sandbox_conformance import _quote_body
from .test_sandbox_world import call

DAY_US = 86_400_000_000


def _usd_rates(world: World) -> dict[tuple[str, str], float]:
    status, body = call(world, "GET", "/exchange-rates", {"sourceCurrency": "USD"})
    assert status == 200, body
    return {
        (r["destinationCurrency"]["code"], r["destinationPaymentRail"]): r["exchangeRate"]
        for r in body["data"]
    }


def test_rates_move_when_the_clock_does() -> None:
    sandbox = Sandbox(seed=4, transactions=300)
    before = _usd_rates(sandbox.world)
    sandbox.advance(timedelta(days=4))
    after = _usd_rates(sandbox.world)
    assert before.keys() == after.keys() and len(before) > 10
    assert all(before[k] != after[k] for k in before)  # every corridor moved
    today = sandbox.now.date()
    series = mid_rate_series(today, today, seed=4).set_index(
        ["sent_currency", "received_currency"]
    )["mid_rate"]
    for (code, _rail), rate in after.items():
        assert rate == series[("USD", code)]


def test_the_series_is_the_same_for_a_seed_and_day_and_differs_by_seed() -> None:
    one = mid_rate_series("2025-01-01", "2025-03-01", seed=7)
    assert one.equals(mid_rate_series("2025-01-01", "2025-03-01", seed=7))
    assert not one["mid_rate"].equals(
        mid_rate_series("2025-01-01", "2025-03-01", seed=8)["mid_rate"]
    )
    # a day of a longer series is that day's rate (no state carried from the series' start)
    tail = mid_rate_series("2025-02-10", "2025-02-10", seed=7).reset_index(drop=True)
    same_day = one[one["date"] == date(2025, 2, 10)].reset_index(drop=True)
    assert tail.equals(same_day)


def test_rates_stay_in_their_band_and_do_use_it() -> None:
    days = np.arange(20_000, 20_000 + 3 * 365)
    for s in range(len(CURRENCY_CODES)):
        for r in range(len(CURRENCY_CODES)):
            if s == r:
                continue
            at = days * DAY_US
            rates = mid_rates(3, at, np.full(len(days), s), np.full(len(days), r))
            deviation = np.abs(np.log(rates / mid_rate(CURRENCY_CODES[s], CURRENCY_CODES[r])))
            pegged = {CURRENCY_CODES[s], CURRENCY_CODES[r]} <= {"USD", "USDC"}
            if pegged:
                assert deviation.max() == 0.0
            else:
                assert deviation.max() <= 2 * RATE_BAND + 1e-12
                assert deviation.max() > RATE_BAND / 4  # the band is used, not a constant
            # constant within a day (a daily fixing), whatever the hour
            later = mid_rates(3, at + DAY_US - 1, np.full(len(days), s), np.full(len(days), r))
            assert np.array_equal(rates, later)


def test_generated_transactions_trade_at_a_spread_over_their_days_mid() -> None:
    sandbox = Sandbox(seed=6, transactions=1_500)
    world = sandbox.world
    series = sandbox.reference_rates().set_index(["date", "sent_currency", "received_currency"])[
        "mid_rate"
    ]
    checked = 0
    for t in world.all_transactions():
        if t["type"] != "OUTGOING":
            continue
        sent, received = (
            t["sentAmount"]["currency"]["code"],
            t["receivedAmount"]["currency"]["code"],
        )
        if sent == received:
            continue
        day = datetime.fromisoformat(t["createdAt"]).astimezone(UTC).date()
        spread = t["exchangeRate"] / series[(day, sent, received)] - 1
        low, high = SPREAD_BY_GROUP[CURRENCY_GROUP[CURRENCY_INDEX[received]]]
        assert low * (1 - 1e-9) <= spread <= high * (1 + 1e-9), (t["id"], spread)
        checked += 1
    assert checked > 100


def test_a_quote_trades_at_todays_mid_and_fails_once_the_rate_moved_past_its_spread() -> None:
    sandbox = Sandbox(seed=5, transactions=300)
    w = sandbox.world
    body = _quote_body(sandbox)
    ids = {row: aid for aid, row in w.entities.account_index.items()}
    acc = w.entities.accounts
    send = int(acc.currency[w.entities.account_index[body["source"]["accountId"]]])
    # a cross-currency destination of the quote's customer's kind: any external account
    destination = next(
        i for i in range(len(acc)) if acc.external[i] and int(acc.currency[i]) != send
    )
    receive = int(acc.currency[destination])
    body["destination"] = {"destinationType": "ACCOUNT", "accountId": ids[destination]}
    status, quote = call(w, "POST", "/quotes", body=body)
    assert status == 201, quote
    today = mid_rates(5, np.array([w.now_us]), np.array([send]), np.array([receive]))[0]
    spread = QUOTE_SPREAD[CURRENCY_GROUP[receive]]
    assert quote["exchangeRate"] == float(f"{today * (1.0 + spread):.8g}")
    # the first midnight after which this corridor's mid rose past the quote's rate
    day = w.now_us // DAY_US
    days = np.arange(day + 1, day + 400)
    later = mid_rates(5, days * DAY_US, np.full(len(days), send), np.full(len(days), receive))
    previous = mid_rates(
        5, (days - 1) * DAY_US, np.full(len(days), send), np.full(len(days), receive)
    )
    jump = int(days[np.flatnonzero(later / previous - 1 > spread)[0]])
    sandbox.advance(timedelta(microseconds=jump * DAY_US - 120_000_000 - w.now_us))
    status, quote = call(w, "POST", "/quotes", body=body)
    assert status == 201, quote
    sandbox.advance(timedelta(minutes=3))  # past midnight, inside the quote's time to live
    status, executed = call(w, "POST", f"/quotes/{quote['id']}/execute")
    assert status == 200, executed
    assert executed["status"] == "FAILED"
    status, tx = call(w, "GET", f"/transactions/{executed['transactionId']}")
    assert (tx["status"], tx["failureReason"]) == ("FAILED", "QUOTE_RATE_UNAVAILABLE")
