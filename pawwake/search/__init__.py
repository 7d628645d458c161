"""Search parts shared by memory search and conversation recall: keyword scoring, term
statistics, semantic fusion, the numpy vector index and the embedding sweep."""
