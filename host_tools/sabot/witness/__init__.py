"""A transparency-log witness (`sabot witness`): C2SP tlog-witness's add-checkpoint for shoes'
logs, with its own Ed25519 key and SQLite state."""
