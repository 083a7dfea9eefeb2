"""Runners: one module per external tool (PATH/import check, invocation, clear errors)."""
