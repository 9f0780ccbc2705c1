"""Reports: tables, figures, paper comparisons and regression verdicts."""
