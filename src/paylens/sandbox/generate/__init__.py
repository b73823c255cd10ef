"""Seeded data generation: `entities` (customers, accounts, cards, people) and `transactions`
(arrivals, scenarios, rows), with the row `schema`, the `money` formula and the `merchants`."""
