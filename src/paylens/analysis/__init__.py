from ._cards import card_summary
from ._failures import failure_breakdown
from ._fees import fee_breakdown
from ._settlement import settlement_times

__all__ = ["card_summary", "failure_breakdown", "fee_breakdown", "settlement_times"]
