"""Generation of the sandbox's transactions: columnar, vectorised, deterministic from the seed.

Money of an OUTGOING transaction
================================
Every outgoing transaction (generated or quoted) carries its money through this one formula.
S is the sending currency with dS decimals, R the receiving currency with dR decimals.

    A    = sentAmount.amount            minor units of S: the total debited, fees included
    x    = exchangeRate                 S major units per one R major unit (float64);
                                        x = 1.0 when S == R
    F    = rateDetails.gridApiFixedFee            minor units of S
    v    = rateDetails.gridApiVariableFeeRate     a fraction (0.003 means 0.3 %)
    V    = rateDetails.gridApiVariableFeeAmount   = round_half_up(A * v)
    P    = platformFees                 minor units of S (0 when no platform fee applies)
    C    = rateDetails.counterpartyFixedFee       minor units of R
    C_s  = round_half_up(C * x * 10^(dS - dR))    C in minor units of S

    fees                  = F + V + P + C_s
    receivedAmount.amount = round_half_up((A - fees) * 10^(dR - dS) / x)

round_half_up(y) = floor(y + 0.5), every step in IEEE float64 in exactly the order written
(integers are converted to float64 first; `10^k` is the float64 nearest to 10**k, as
`10.0 ** k` in Python or `power(10, k)` in SQL give), so a warehouse reproduces each field to
the minor unit: `fees - (F + V + P + C_s)` and the recomputed received amount differ by exactly 0.

The platform fee comes from the platform's fee configuration (`GET /config` `feeConfigs`: one
CROSS_CURRENCY_TRANSACTION config for USD): for a cross-currency transaction sent in USD,
`P = (A * variableFeeBps + 5000) // 10000 + fixedFee.amount` in integers (half-up), else 0;
a quote's `platformFeeOverride` replaces the configuration for that quote.

The rate multipliers are derived from a reference BTC price per currency,
`btc(S) = BTC_USD / usd(S)` major units of S per BTC (see `currencies`):

    m_S                              = 1e11 / (btc(S) * 10^dS)      msats per minor unit of S
    rateDetails.gridApiMultiplier     = (1 - v) * m_S
    rateDetails.counterpartyMultiplier = 10^(dR - dS) / (x * m_S)   minor units of R per msat

so gridApiMultiplier * counterpartyMultiplier = (1 - v) * 10^(dR - dS) / x (up to float64
rounding): what one minor unit of S buys in minor units of R after the variable fee.

`x` is the corridor's mid rate of the transaction's creation day (`midrates.mid_rates`, served
on `GET /exchange-rates`) times (1 + a spread drawn per transaction, 0.1 % to 1 % by corridor),
so the FX spread is `x / mid - 1`. The fixed fees are converted at the reference prices.

Incoming transactions use the same shape without rateDetails: `fees` (minor units of S) are a
fixed service fee for UMA payments and 0 for deposits and pulls, and
`receivedAmount = round_half_up((sentAmount - fees) * 10^(dR - dS) / x)`.
"""

from __future__ import annotations

import numpy as np

from ..currencies import (
    BTC_USD,
    DECIMALS,
    USD_PRICE,
    pow10,
)


def round_half_up(y: np.ndarray) -> np.ndarray:
    return np.floor(y + 0.5).astype(np.int64)


def outgoing_money(
    sent: np.ndarray,
    send_cur: np.ndarray,
    recv_cur: np.ndarray,
    fx: np.ndarray,
    var_rate: np.ndarray,
    fixed_fee: np.ndarray,
    platform_fee: np.ndarray,
    cpty_fee: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(V, fees, received) of the module's formula, elementwise over arrays."""
    d_s, d_r = DECIMALS[send_cur], DECIMALS[recv_cur]
    var_fee = round_half_up(sent.astype(np.float64) * var_rate)
    cpty_in_sending = round_half_up(cpty_fee.astype(np.float64) * fx * pow10(d_s - d_r))
    fees = fixed_fee + var_fee + platform_fee + cpty_in_sending
    received = round_half_up((sent - fees).astype(np.float64) * pow10(d_r - d_s) / fx)
    return var_fee, fees, received


def platform_fee(sent: np.ndarray, cross_currency: np.ndarray, bps: int, fixed: int) -> np.ndarray:
    """P of the module's formula for transactions whose sending currency has the fee config."""
    return np.where(cross_currency, (sent * bps + 5_000) // 10_000 + fixed, 0)


def multipliers(
    send_cur: np.ndarray, recv_cur: np.ndarray, fx: np.ndarray, var_rate: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(gridApiMultiplier, counterpartyMultiplier) of the module's formula, elementwise."""
    d_s, d_r = DECIMALS[send_cur], DECIMALS[recv_cur]
    msats_per_minor = 1e11 / (BTC_USD / USD_PRICE[send_cur] * pow10(d_s))
    return (1.0 - var_rate) * msats_per_minor, pow10(d_r - d_s) / (fx * msats_per_minor)
