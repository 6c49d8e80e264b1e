"""Helpers shared by the test suites (real services, subprocess runners)."""
