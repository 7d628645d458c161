"""SQL only: small async functions over an aiopg pool, one module per table family."""
