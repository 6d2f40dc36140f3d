"""Retrieval: one module per retriever behind the `Retriever` Protocol (retriever.py), run side by side and fused
by `Searcher` (searcher.py), whose table of retrievers is the list of what a search can run."""
