"""The release key's public half (P-256, X||Y, 64 bytes): the boot check verifies the MANIFEST's
signature with it (shoe/integrity.py). The host's build writes the real key into a built tree;
None here marks a development tree, which no shoe accepts as certified code."""

PUBLIC_KEY = None
