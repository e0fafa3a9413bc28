"""The validator and its audit store: frame verification, content accounting, the alarms on what is
dealt, the store, `sabot audit verify`."""
