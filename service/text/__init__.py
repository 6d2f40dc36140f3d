"""Text utilities: time phrases in queries and token counts for budgets."""
