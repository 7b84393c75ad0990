"""An MCP server that never answers: it reads its stdin and says nothing, and ignores the end of it (the worst case
for whoever waits for it, or has to stop it)."""

import sys
import time

while sys.stdin.buffer.read1(65536):
    pass
time.sleep(3600)
