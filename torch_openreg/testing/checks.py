"""Running a computation on both devices: the outcomes (result or exception) must agree."""


class SkipCase(Exception):
    """Raised by a case that does not apply (the reason is the message)."""


def outcome(call):
    """``(result, None)`` or ``(None, exception)``."""
    try:
        return call(), None
    except Exception as error:  # noqa: BLE001 - any error is an outcome to compare
        return None, error


def expect_same_outcome(cpu_call, device_call):
    """Runs both calls; returns ``(cpu_result, device_result)``, or None when both raised alike.

    The CPU raising and openreg not (or the reverse, or another exception
    type) is a failure; ``SkipCase`` from the CPU call skips the case.
    """
    expected, cpu_error = outcome(cpu_call)
    if isinstance(cpu_error, SkipCase):
        raise cpu_error
    actual, device_error = outcome(device_call)
    if cpu_error is None and device_error is None:
        return expected, actual
    if cpu_error is not None and device_error is not None:
        if isinstance(device_error, type(cpu_error)):
            return None
        raise AssertionError(
            f"CPU raised {type(cpu_error).__name__}: {_first_line(cpu_error)}; openreg raised "
            f"{type(device_error).__name__}: {_first_line(device_error)}"
        ) from device_error
    if cpu_error is not None:
        raise AssertionError(
            f"CPU raised {type(cpu_error).__name__}: {_first_line(cpu_error)}; openreg did not raise"
        )
    raise device_error


def _first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else ""
