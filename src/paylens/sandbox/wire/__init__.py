"""The simulated service's HTTP side: the app that dispatches requests, the loopback server, the
in-process transports, faults, request parsing and Idempotency-Key handling."""
