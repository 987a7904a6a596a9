"""BenchError, the one failure the benchmark reports: a broker or tool failed, or a figure
is missing or implausible. main prints it and exits 1."""


class BenchError(Exception):
    """A broker or tool failed; the message says which and shows the end of its output."""
