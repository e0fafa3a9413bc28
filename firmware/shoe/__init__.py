"""sabot shoe firmware: the card path from sensor to signed result. Logic modules import no
`machine`."""
