"""SQL only: small async functions taking a cursor first, one module per table family; callers
own transactions (``db.pool.transaction`` / ``db.pool.cursor``)."""
