"""kiln's error hierarchy: the CLI turns any KilnError into one line and exit code 2."""


class KilnError(Exception):
    """Base of every error kiln reports to a user (bad input, not a bug)."""


class ModelError(KilnError):
    """The model file is malformed, or uses an op or type kiln cannot compile."""


class InputError(KilnError):
    """Input data (inputs, calibration data, options) has the wrong shape, dtype or value."""


class BoardError(KilnError):
    """Unknown board, or the model does not fit the board."""


class FitError(BoardError):
    """A firmware (the model's, or a tuning build) does not fit the board's flash or RAM."""


class BuildError(KilnError):
    """A C build (host or cross) failed."""


class TransportError(KilnError):
    """The serial link to the target is dead, noisy beyond recovery, or timed out."""


class DeviceError(KilnError):
    """The target answered, but with an error, other firmware, or after a reset."""
