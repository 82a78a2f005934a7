"""The one exception type for bad input that the user can fix."""


class InputError(Exception):
    """Bad input or a missing/corrupt file: the message is one line naming what is wrong and the fix.

    The command line prints it without a traceback and exits non-zero; anything else
    that escapes is a bug and keeps its traceback.
    """
