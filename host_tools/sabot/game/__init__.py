"""The rules of the game: cards, the third-card rule, wagers, settlement, exact analysis, live
edges, roads. Pure: no I/O."""
