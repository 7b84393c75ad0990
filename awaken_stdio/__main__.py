"""``python -m awaken_stdio``."""

from awaken_stdio.cli import main

raise SystemExit(main())
