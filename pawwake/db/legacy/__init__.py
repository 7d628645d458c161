"""SQL that reads a Pawwake 4.x database (4.0.x or 4.1.x) and moves it into our schema."""
