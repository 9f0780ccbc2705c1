"""mprig: Wi-Fi/cellular testbed orchestration for Multipath TCP."""

__version__ = "0.1.0"
