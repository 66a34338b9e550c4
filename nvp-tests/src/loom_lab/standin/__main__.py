"""`python -m loom_lab.standin`: serve a fleet of stand-in transport nodes."""

import sys

from loom_lab.standin.fleet import main

sys.exit(main())
