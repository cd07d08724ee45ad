"""State backends: keyed and operator state behind a small protocol."""
