"""sabot host tools: validator, table generator, exact analyzer, settlement, bench and
deploy tools."""

from __future__ import annotations

__version__ = "0.1.0"
