"""Stage 1, the campaign: a YAML file read, checked and expanded into runs, with the Wi-Fi
channel model that turns a distance into a rate and loss at plan time. Imports nothing of
the later stages (docs/architecture.md)."""
