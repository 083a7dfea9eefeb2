"""keracheck: compile once, run every target, compare bit for bit."""
