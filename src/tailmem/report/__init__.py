"""Claims, verdicts and the report built from run directories."""
