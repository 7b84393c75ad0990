"""A ``[tools] modules`` module whose import never returns."""

import threading

threading.Event().wait()
