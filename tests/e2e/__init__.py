"""End-to-end tests: the example workflow under act, with real builds."""
