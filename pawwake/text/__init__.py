"""Pure text helpers: tokenising Chinese and English for search."""
