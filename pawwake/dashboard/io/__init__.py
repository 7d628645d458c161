"""Moving memories in and out: the import page (plain text, JSON backup) and the export page."""
