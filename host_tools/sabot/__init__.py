"""sabot host tools: validator, table generator, exact analyzer, settlement, bench and deploy tools."""

__version__ = "0.1.0"
