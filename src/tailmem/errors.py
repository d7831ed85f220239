"""User-facing errors.

Anything raised as a :class:`TailmemError` is bad input (a config field, a CLI flag, a corrupt
checkpoint, a missing file). The CLI prints its message as one line and exits with code 2; the
message must name what is wrong and what was expected.
"""


class TailmemError(ValueError):
    """Base class for errors caused by the user's input, reported without a traceback."""


class ConfigError(TailmemError):
    """A config field, preset or override is invalid."""


class DataError(TailmemError):
    """A data file, data set or results file is missing or malformed."""


class CheckpointError(TailmemError):
    """A checkpoint is missing, truncated or does not match the run."""


def describe_exception(exc: BaseException) -> str:
    """``Type: its message`` on one line (cut to 200 characters): how one line names an
    exception of a user's code."""
    text = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= 200 else f"{text[:197]}..."
