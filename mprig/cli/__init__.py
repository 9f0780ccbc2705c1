"""The `mprig` command line: `main` registers one module per command (`cmd_*`, and the
collectors' and reports' own), each a thin edge over its stage (docs/architecture.md)."""
