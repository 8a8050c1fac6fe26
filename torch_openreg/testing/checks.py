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
    expected = outcome(cpu_call)
    if isinstance(expected[1], SkipCase):
        raise expected[1]
    return same_outcome(expected, outcome(device_call))


def same_outcome(expected, actual, names=("CPU", "openreg")):
    """Two ``outcome`` pairs: ``(expected_result, actual_result)``, or None when both raised alike.

    One raising and not the other, or another exception type, is an
    ``AssertionError`` naming both sides by ``names``; an exception of the
    actual side alone is re-raised.
    """
    (expected, expected_error), (actual, actual_error) = expected, actual
    expected_name, actual_name = names
    if expected_error is None and actual_error is None:
        return expected, actual
    if expected_error is not None and actual_error is not None:
        if isinstance(actual_error, type(expected_error)):
            return None
        raise AssertionError(
            f"{expected_name} raised {type(expected_error).__name__}: {_first_line(expected_error)}; {actual_name} "
            f"raised {type(actual_error).__name__}: {_first_line(actual_error)}"
        ) from actual_error
    if expected_error is not None:
        raise AssertionError(
            f"{expected_name} raised {type(expected_error).__name__}: {_first_line(expected_error)}; "
            f"{actual_name} did not raise"
        )
    raise actual_error


def _first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else ""
