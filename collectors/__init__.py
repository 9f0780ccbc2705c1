"""Collectors: pcaps, ss, nstat and iperf3 output to reordering and buffer metrics."""
