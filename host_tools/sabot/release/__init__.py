"""Releasing firmware: the decision table, builds, deploying, verifying a shoe's firmware, the
bench."""
