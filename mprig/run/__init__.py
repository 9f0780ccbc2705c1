"""Stage 3, the run: the campaign runner (`runner`), each attempt's stages, the exact
commands of traffic, capture, impairments and timed changes, and the bundle every run
leaves. Uses the stack, the rig and the campaign; only the command line uses it
(docs/architecture.md)."""
