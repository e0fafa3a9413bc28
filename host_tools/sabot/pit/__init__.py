"""`sabot serve`: the pit's validation threads and its pages."""
