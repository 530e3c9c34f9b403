"""Reading run directories for the pages: cached run lists, scalars frames and DuckDB questions."""
