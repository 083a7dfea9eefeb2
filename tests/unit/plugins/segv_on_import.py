"""A plugin file whose import kills its process (for the containment tests)."""

import os
import signal

os.kill(os.getpid(), signal.SIGSEGV)


class Never:
    pass
