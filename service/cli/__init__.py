"""The `python -m service` commands for operators and for a person at a terminal."""
